package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a capstan child the driver starts, kills with SIGKILL and
// starts again. One that exits while it should run is started again after
// a second, and counted: the controllers and the plane are meant to stay
// up on their own.
type process struct {
	name string
	bin  string
	args []string
	log  string
	// ready, when set, reads the child's "ready" line from file
	// descriptor 3 before start returns (capstan up --notify-fd 3).
	ready   bool
	timeout time.Duration

	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	killing   bool
	unplanned int
	ctx       context.Context
}

// start runs the child and, for one that reports readiness, waits for it.
func (p *process) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked(ctx)
}

func (p *process) startLocked(ctx context.Context) error {
	p.ctx = ctx
	p.killing = false
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "==== chaos: starting %s at %s ====\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Nothing the driver starts may outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var readEnd *os.File
	if p.ready {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		readEnd = r
		defer readEnd.Close()
		cmd.ExtraFiles = []*os.File{w}
		defer w.Close()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the %s (%s %s): %w", p.name, p.bin, strings.Join(p.args, " "), err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go p.watch(cmd, exited)
	if !p.ready {
		return nil
	}
	cmd.ExtraFiles[0].Close()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(readEnd).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s == "ready" {
			return nil
		}
		return fmt.Errorf("the %s did not start (%q); see %s", p.name, s, p.log)
	case <-time.After(p.timeout):
		return fmt.Errorf("the %s was not ready within %s; see %s", p.name, p.timeout, p.log)
	}
}

// watch waits for the child and starts it again when it exited by itself.
func (p *process) watch(cmd *exec.Cmd, exited chan struct{}) {
	_ = cmd.Wait()
	close(exited)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killing || p.cmd != cmd || p.ctx.Err() != nil {
		return
	}
	p.unplanned++
	go func() {
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(time.Second):
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cmd == cmd && !p.killing && p.ctx.Err() == nil {
			_ = p.startLocked(p.ctx)
		}
	}()
}

// kill sends SIGKILL and waits until the child is gone.
func (p *process) kill() {
	p.mu.Lock()
	p.killing = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// unplannedExits is how often the child exited without being killed.
func (p *process) unplannedExits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unplanned
}
