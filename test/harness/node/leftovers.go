package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Leftovers lists what the node made that is still there after Stop: its
// cgroups, its network namespace and link, the host's route to its pods,
// a mount of its folder, a process that names its folder (containerd's
// shims do). Empty when Stop removed everything.
func (n *Node) Leftovers() []string {
	var left []string
	for _, c := range controllers {
		if _, err := os.Stat(filepath.Join(cgroupRoot, c, n.l.Cgroup)); err == nil {
			left = append(left, "cgroup "+c+n.l.Cgroup)
		}
	}
	if _, err := os.Stat("/run/netns/" + n.netns); err == nil {
		left = append(left, "network namespace "+n.netns)
	}
	if _, err := os.Stat("/sys/class/net/" + n.hostLink); err == nil {
		left = append(left, "link "+n.hostLink)
	}
	for _, to := range []string{n.PodCIDR.String(), n.testHostCIDR.String()} {
		if out, _ := exec.Command("ip", "route", "show", to).Output(); len(strings.TrimSpace(string(out))) > 0 {
			left = append(left, "route "+strings.TrimSpace(string(out)))
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, n.l.Dir) {
				left = append(left, "mount "+line)
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), n.l.Dir) {
			left = append(left, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	return left
}
