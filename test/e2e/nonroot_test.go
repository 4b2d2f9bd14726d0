package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

// TestTailscaledRunsAsNonRoot backs the relay pods' securityContext
// (runAsNonRoot, uid 1000, no capabilities): the real tailscaled, in
// userspace networking with our config, runs as an unprivileged user, binds
// the relay port and advertises our endpoints.
func TestTailscaledRunsAsNonRoot(t *testing.T) {
	harness.Need(t, os.Geteuid() == 0, "needs root to start a process as another user")
	w := startWorld(t)
	port := w.addRelay(t, "203.0.113.7")
	dir := t.TempDir()
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	must(t, os.Chmod(dir, 0o755))
	cfgFile := filepath.Join(dir, tsconfig.FileName)
	eps := waitForConfig(t, w.provider, cfgFile, []string{fmt.Sprintf("203.0.113.7:%d", port)})
	must(t, os.Chmod(cfgFile, 0o644))

	ts := w.startTailscaled(t, cfgFile, &syscall.Credential{Uid: 1000, Gid: 1000})
	tailnet.WaitRunning(t, ts.LocalClient, time.Minute)
	assertPrefs(t, ts, port, eps)
	st, err := os.Stat(fmt.Sprintf("/proc/%d", ts.Pid()))
	must(t, err)
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 1000 {
		t.Errorf("tailscaled runs as uid %d, want 1000", uid)
	}
}
