package kubelet

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/peerrelay/peerrelay/test/harness"
)

// podNetwork is a bridge with a /24 on it, and a network namespace per pod
// or test host plugged into it with a veth pair: each pod has its own
// address, as on a cluster, so every replica can bind the same UDP port.
// Every name carries this test process's PID, so a later run can tell its
// own leftovers from another package's running network and remove them.
type podNetwork struct {
	bridge string
	prefix netip.Prefix
	// Gateway is the host's address on the bridge; Services is a second
	// one, where the test's servers (control, DERP) listen.
	Gateway, Services netip.Addr

	mu   sync.Mutex
	next int
}

var ownedName = regexp.MustCompile(`^pr(\d+)(?:n\d+)?$`)

// startPodNetwork creates the bridge, and removes it and every namespace
// made on it when the test ends.
func startPodNetwork(t testing.TB) *podNetwork {
	t.Helper()
	harness.Need(t, os.Geteuid() == 0, "pods run in network namespaces: run the tests as root")
	removeLeftovers()
	pid := os.Getpid()
	third := pid%200 + 20
	pn := &podNetwork{
		bridge:   fmt.Sprintf("pr%d", pid),
		prefix:   netip.MustParsePrefix(fmt.Sprintf("10.77.%d.0/24", third)),
		Gateway:  netip.MustParseAddr(fmt.Sprintf("10.77.%d.1", third)),
		Services: netip.MustParseAddr(fmt.Sprintf("10.77.%d.2", third)),
		next:     10,
	}
	t.Cleanup(func() { removeOwned(pid) })
	for _, args := range [][]string{
		{"link", "add", pn.bridge, "type", "bridge"},
		{"addr", "add", pn.Gateway.String() + "/24", "dev", pn.bridge},
		{"addr", "add", pn.Services.String() + "/32", "dev", pn.bridge},
		// The kubernetes Service's ClusterIP: the node proxies it to the API server.
		{"addr", "add", harness.KubernetesServiceIP.String() + "/32", "dev", pn.bridge},
		{"link", "set", pn.bridge, "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	return pn
}

// add makes a namespace with its own address on the bridge and a default
// route through the host; it returns the namespace's name and address.
func (pn *podNetwork) add() (string, netip.Addr, error) {
	pn.mu.Lock()
	n := pn.next
	pn.next++
	pn.mu.Unlock()
	if n > 250 {
		return "", netip.Addr{}, fmt.Errorf("the pod network is full")
	}
	addr := pn.prefix.Addr().As4()
	addr[3] = byte(n)
	a := netip.AddrFrom4(addr)
	ns := fmt.Sprintf("%sn%d", pn.bridge, n)
	host, peer := ns+"h", ns+"p"
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
		{"link", "set", host, "master", pn.bridge, "up"},
		{"-n", ns, "link", "set", peer, "name", "eth0"},
		{"-n", ns, "addr", "add", a.String() + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "route", "add", "default", "via", pn.Gateway.String()},
	} {
		if err := ip(args...); err != nil {
			removeNetns(ns)
			return "", netip.Addr{}, err
		}
	}
	return ns, a, nil
}

// removeNetns kills what still runs in the namespace and deletes it; its
// veth pair goes with it.
func removeNetns(ns string) {
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = ip("netns", "del", ns)
	// A namespace can outlive its mount point a while (the kernel frees it
	// when the last reference goes); its veth pair goes now.
	_ = ip("link", "del", ns+"h")
}

// removeOwned removes the namespaces and the bridge of test process pid.
func removeOwned(pid int) {
	owner := strconv.Itoa(pid)
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 {
			if m := ownedName.FindStringSubmatch(f[0]); m != nil && m[1] == owner {
				removeNetns(f[0])
			}
		}
	}
	for _, name := range ownedLinks()[pid] {
		_ = ip("link", "del", name)
	}
}

// removeLeftovers removes what test processes that no longer run left
// behind (a run killed before its cleanup).
func removeLeftovers() {
	owners := map[int]bool{}
	for pid := range ownedLinks() {
		owners[pid] = true
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			if m := ownedName.FindStringSubmatch(f[0]); m != nil {
				pid, _ := strconv.Atoi(m[1])
				owners[pid] = true
			}
		}
	}
	for pid := range owners {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			removeOwned(pid)
		}
	}
}

// ownedLinks lists the bridges and veth ends test processes made, by the
// PID in their names.
func ownedLinks() map[int][]string {
	links := map[int][]string{}
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if m := ownedName.FindStringSubmatch(strings.TrimSuffix(name, "h")); m != nil {
				pid, _ := strconv.Atoi(m[1])
				links[pid] = append(links[pid], name)
			}
		}
	}
	return links
}

func ip(args ...string) error { return harness.IP(args...) }
