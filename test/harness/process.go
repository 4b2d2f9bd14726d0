package harness

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a child process the harness started; its output is kept for
// the test to read and is printed when the test fails.
type Process struct {
	Name string
	Log  *SyncBuffer

	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess starts bin with args and env added to this process's
// environment, and as user when one is given (nil: this process's). It is
// stopped (SIGTERM, then SIGKILL after 10 s) when the test ends, and its
// output is shown if the test failed.
func StartProcess(t testing.TB, name, bin string, args, env []string, user ...*syscall.Credential) *Process {
	t.Helper()
	p, err := TryStartProcess(t, name, bin, args, env, user...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TryStartProcess is StartProcess for goroutines other than the test's,
// which may not call t.Fatal.
func TryStartProcess(t testing.TB, name, bin string, args, env []string, user ...*syscall.Credential) (*Process, error) {
	p := &Process{Name: name, Log: &SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.Log, p.Log
	// Its own process group, so Stop reaches any child it started; and it
	// dies with the test binary (a timed-out test runs no cleanup), rather
	// than hold its ports for the next run.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if len(user) > 0 {
		p.cmd.SysProcAttr.Credential = user[0]
	}
	if err := spawn(p.cmd.Start); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() || os.Getenv("PEERRELAY_TEST_LOGS") != "" {
			t.Logf("---- %s output (last 64 KiB) ----\n%s", name, Tail(p.Log.String(), 64<<10))
		}
	})
	return p, nil
}

// spawner is the one OS thread every child is forked from (spawn).
var (
	spawnerOnce sync.Once
	spawns      = make(chan func())
)

// spawn runs start (an exec.Cmd's Start) on a thread kept for the life of
// the test binary. The kernel sends Pdeathsig when the thread that forked
// the child exits, not the process (go.dev/issue/27505), and the Go runtime
// ends a thread whenever a goroutine returns with it still locked, as one
// that joined a network namespace with setns must (test/harness/node's
// dialIn): a child forked from such a thread was killed there, mid-test.
// From a thread that never exits, Pdeathsig means what it says: the child
// dies with the test binary.
func spawn(start func() error) error {
	spawnerOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range spawns {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	spawns <- func() { errc <- start() }
	return <-errc
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop ends the process and waits for it.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Tail is the last n bytes of s, from a line's start.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// IP runs ip(8) with args: the test's network namespaces, links and routes.
func IP(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
