package harness

import (
	"runtime"
	"testing"
	"time"
)

// TestProcessOutlivesItsStartersThread: a process started from a goroutine
// whose locked thread then ends (as a goroutine that joined a network
// namespace with setns does) keeps running until the test stops it. The
// kernel ties Pdeathsig to the thread that forked a child: forked from
// that goroutine's thread, the child was killed when it ended.
func TestProcessOutlivesItsStartersThread(t *testing.T) {
	started := make(chan *Process, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime ends the thread with this goroutine
		p, err := TryStartProcess(t, "sleep", "sleep", []string{"60"}, nil)
		if err != nil {
			t.Error(err)
		}
		started <- p
	}()
	p := <-started
	if p == nil {
		return
	}
	// The goroutine has returned; its thread ends at once, and a child it
	// had forked would have its SIGKILL by now.
	time.Sleep(time.Second)
	if p.Exited() {
		t.Fatalf("the process died with the thread its start ran on: %v", p.cmd.ProcessState)
	}
}
