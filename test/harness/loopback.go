package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// loopbackSeq numbers the loopback addresses this process hands out.
var loopbackSeq atomic.Uint32

// LoopbackAddress returns host:port on loopback for one server to listen on,
// which no other process's server can hold: Linux answers on all of
// 127.0.0.0/8, and the host is made from this process's PID (below
// 2^22), so each test process has 127.128.0.0/10 addresses of its own. A
// port found free and then closed could be taken by another process before
// the server binds it; this cannot.
func LoopbackAddress() string {
	pid := os.Getpid()
	n := loopbackSeq.Add(1)
	return fmt.Sprintf("127.%d.%d.%d:%d", 128+(pid>>16)&63, (pid>>8)&255, pid&255, 20000+n)
}

// StartFunctionBinary runs a composition function binary with --insecure
// on a loopback address of its own, waits until it accepts connections,
// and returns it and its address. It is stopped when the test ends.
func StartFunctionBinary(t testing.TB, bin string, args ...string) (*Process, string) {
	t.Helper()
	addr := LoopbackAddress()
	p := StartProcess(t, filepath.Base(bin), bin, append([]string{"--insecure", "--address=" + addr}, args...), nil)
	Eventually(t, 20*time.Second, filepath.Base(bin)+" listens on "+addr, func(ctx context.Context) error {
		if p.Exited() {
			return fmt.Errorf("exited:\n%s", p.Log.String())
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return p, addr
}
