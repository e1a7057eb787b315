package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Usage is what a process used up to the moment it was read.
type Usage struct {
	// RSSMiB is the resident memory now (VmRSS); PeakRSSMiB the most it
	// has been (VmHWM).
	RSSMiB, PeakRSSMiB float64
	// CPUSeconds is the CPU time used so far, user and system.
	CPUSeconds float64
}

// clockTicksPerSecond is the unit of /proc/PID/stat's CPU times on Linux
// (USER_HZ), 100 on every architecture Go supports there.
const clockTicksPerSecond = 100

// Read reads process pid's usage.
func Read(pid int) (Usage, error) {
	if pid <= 0 {
		return Usage{}, fmt.Errorf("procstat: no process %d", pid)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	for _, line := range strings.Split(string(status), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			u.RSSMiB = kibToMiB(fields[1])
		case "VmHWM:":
			u.PeakRSSMiB = kibToMiB(fields[1])
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after its closing one are fixed. utime and stime are
	// fields 14 and 15 of the line, 12 and 13 after the name.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("procstat: /proc/%d/stat has %d fields after the command name, want at least 13", pid, len(f))
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("procstat: /proc/%d/stat: utime %q, stime %q are not numbers", pid, f[11], f[12])
	}
	u.CPUSeconds = (utime + stime) / clockTicksPerSecond
	return u, nil
}

func kibToMiB(s string) float64 {
	kib, _ := strconv.ParseFloat(s, 64)
	return kib / 1024
}
