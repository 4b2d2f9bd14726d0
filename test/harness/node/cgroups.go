package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const cgroupRoot = "/sys/fs/cgroup"

// controllers are the cgroup hierarchies mounted under /sys/fs/cgroup (this
// kernel's v1 controllers, systemd's named one, and the v2 hierarchy beside
// them), read from the mount table: the node's cgroup is made in and
// removed from each, since the kubelet refuses a cgroupRoot missing from
// any and runc makes each container's cgroup in all of them.
var controllers = mountedHierarchies()

func mountedHierarchies() []string {
	b, _ := os.ReadFile("/proc/self/mounts")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[2] != "cgroup" && f[2] != "cgroup2") || filepath.Dir(f[1]) != cgroupRoot {
			continue
		}
		out = append(out, filepath.Base(f[1]))
	}
	return out
}

// joinCgroup is shell that moves the shell itself into the node's cgroup
// node/ (containerd, the kubelet, kube-proxy, CoreDNS: what it runs next
// stays there).
func joinCgroup(cg string) string {
	var b strings.Builder
	for _, c := range controllers {
		fmt.Fprintf(&b, "echo $$ > %s\n", shellQuote(filepath.Join(cgroupRoot, c, cg, "node", "cgroup.procs")))
	}
	return b.String()
}

// makeCgroups makes the node's cgroup and its node/ child (containerd and
// the kubelet) under every controller. A cpuset cgroup starts with no CPUs
// and no memory nodes: each takes its parent's.
func makeCgroups(cg string) error {
	for _, c := range controllers {
		for _, dir := range []string{filepath.Join(cgroupRoot, c, cg), filepath.Join(cgroupRoot, c, cg, "node")} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if c != "cpuset" {
				continue
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cgroupProcs lists the processes in the node's cgroup and below it (the
// pids controller holds every one of them).
func cgroupProcs(cg string) []int {
	var pids []int
	_ = filepath.WalkDir(filepath.Join(cgroupRoot, "pids", cg), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killCgroup kills every process in the node's cgroup until none is left:
// the containers, containerd's shims (which leave containerd's process
// group), and whatever they started.
func killCgroup(cg string) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		pids := cgroupProcs(cg)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeCgroups removes the node's cgroups, deepest first.
func removeCgroups(cg string) {
	for _, c := range controllers {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(cgroupRoot, c, cg), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			for i := 0; i < 50; i++ {
				// A cgroup whose last process just died can be busy a moment.
				if err := syscall.Rmdir(d); err == nil || errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.EBUSY) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// cpuUsed is the CPU time the processes in the node's cgroup sub have used
// ("" for the whole node, "node" for its own processes: the kubelet,
// containerd and its shims, kube-proxy, CoreDNS), from the cpuacct
// controller.
func cpuUsed(cg, sub string) time.Duration {
	b, err := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", cg, sub, "cpuacct.usage"))
	if err != nil {
		return 0
	}
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns)
}
