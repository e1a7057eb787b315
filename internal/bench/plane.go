package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// plane is a management plane in a child process.
type plane struct {
	dir        string
	kubeconfig string
	cmd        *exec.Cmd
}

// startPlane runs `binary up --foreground --controllers=false` on a fresh
// state directory and waits until its API is ready.
func startPlane(binary string) (*plane, error) {
	dir, err := os.MkdirTemp("", "capstan-bench-")
	if err != nil {
		return nil, err
	}
	p := &plane{dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	logFile, err := os.Create(filepath.Join(dir, "plane.log"))
	if err != nil {
		p.stop()
		return nil, err
	}
	defer logFile.Close()
	readEnd, writeEnd, err := os.Pipe()
	if err != nil {
		p.stop()
		return nil, err
	}
	defer readEnd.Close()
	p.cmd = exec.Command(binary, "up", "--foreground", "--controllers=false", "--state-dir", dir, "--notify-fd", "3")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.ExtraFiles = []*os.File{writeEnd}
	// The plane must not outlive the benchmark.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		writeEnd.Close()
		p.cmd = nil
		p.stop()
		return nil, fmt.Errorf("starting the management plane (%s up): %w", binary, err)
	}
	writeEnd.Close()
	line, _ := bufio.NewReader(readEnd).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		log, _ := os.ReadFile(logFile.Name())
		p.stop()
		return nil, fmt.Errorf("the management plane did not start (%q); its log ends:\n%s", strings.TrimSpace(line), lastLines(string(log), 30))
	}
	return p, nil
}

// stop ends the plane and removes its state directory.
func (p *plane) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(p.dir)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
