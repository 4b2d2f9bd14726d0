package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// slots is how many nodes may run at once on a machine: each takes a slot,
// which names its namespaces and cgroup and numbers its addresses, so
// nodes of test binaries running side by side (go test runs packages in
// parallel) never share one.
const slots = 200

// slot is a node's claim on its number: a lock held for the node's life.
// The kernel lets it go with the process, so a slot that can be taken is
// one no live node holds, and whatever a node of that number left (its
// test binary was killed) can be removed.
type slot struct {
	n    int
	lock *os.File
}

var slotDir = filepath.Join(os.TempDir(), "peerrelay-node-slots")

// claimSlot takes the first free slot from this process's own, removing
// what an earlier node of that number left.
func claimSlot() (*slot, error) {
	if err := os.MkdirAll(slotDir, 0o755); err != nil {
		return nil, err
	}
	for i := range slots {
		n := (os.Getpid() + i) % slots
		f, err := os.OpenFile(filepath.Join(slotDir, strconv.Itoa(n)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			_ = f.Close()
			continue
		}
		s := &slot{n: n, lock: f}
		s.removeLeftovers()
		return s, nil
	}
	return nil, fmt.Errorf("all %d node slots are taken", slots)
}

func (s *slot) netns() string  { return fmt.Sprintf("prnode%d", s.n) }
func (s *slot) cgroup() string { return fmt.Sprintf("/peerrelay-node-%d", s.n) }

// removeLeftovers removes what a killed node of this slot left: its
// processes and containers, its cgroups, its namespaces (its test hosts'
// included) and link.
func (s *slot) removeLeftovers() {
	killCgroup(s.cgroup())
	removeCgroups(s.cgroup())
	nss, _ := filepath.Glob("/run/netns/" + s.netns() + "t*")
	for _, ns := range append(nss, "/run/netns/"+s.netns()) {
		_ = ip("netns", "delete", filepath.Base(ns))
	}
	_ = ip("link", "delete", s.netns()+"h")
}

// release lets the slot go.
func (s *slot) release() {
	_ = os.Remove(s.lock.Name())
	_ = s.lock.Close()
}
