package procstat

import (
	"os"
	"testing"
	"time"
)

// This process's own figures: memory it holds, and CPU time that grows
// with work done.
func TestReadSelf(t *testing.T) {
	before, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.RSSMiB <= 0 || before.PeakRSSMiB < before.RSSMiB {
		t.Errorf("memory: RSS %.1f MiB, peak %.1f MiB; want a positive RSS no larger than the peak", before.RSSMiB, before.PeakRSSMiB)
	}
	buf := make([]byte, 64<<20)
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
		for i := range buf {
			buf[i]++
		}
	}
	after, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.CPUSeconds <= before.CPUSeconds {
		t.Errorf("CPU time %.2f s after 300 ms of work, %.2f s before: want it to grow", after.CPUSeconds, before.CPUSeconds)
	}
	if after.PeakRSSMiB < before.RSSMiB+60 {
		t.Errorf("peak RSS %.1f MiB after touching 64 MiB more than the %.1f MiB held before", after.PeakRSSMiB, before.RSSMiB)
	}
}

func TestReadRefusesNoProcess(t *testing.T) {
	if _, err := Read(0); err == nil {
		t.Error("Read(0) gave no error")
	}
	if _, err := Read(1 << 30); err == nil {
		t.Error("Read of a pid that does not exist gave no error")
	}
}
