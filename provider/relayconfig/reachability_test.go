package relayconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/provider/probe"
)

// TestProberJoinRetry: a prober that cannot join is not joined again, nor
// a key minted for it, until joinRetry has passed; a changed provider
// config joins at once.
func TestProberJoinRetry(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	ps := newProbers()
	ps.now = func() time.Time { return now }
	joins := 0
	ps.join = func(context.Context, probe.Options) (*probe.Prober, error) {
		joins++
		return nil, errors.New("control says no")
	}
	api := &fakeAPI{}
	get := func(config string) error {
		_, err := ps.prober(t.Context(), "ClusterProviderConfig/default", "", config, probe.Options{}, api, []string{"tag:probe"})
		return err
	}
	steps := []struct {
		reason        string
		after         time.Duration
		config        string
		joins, minted int
	}{
		{reason: "The first probe joins, with a key minted for it.", config: "a", joins: 1, minted: 1},
		{reason: "Within joinRetry the failure is reported again, nothing minted.", after: 30 * time.Second, config: "a", joins: 1, minted: 1},
		{reason: "After joinRetry it tries again.", after: joinRetry, config: "a", joins: 2, minted: 2},
		{reason: "A changed provider config joins at once.", after: time.Second, config: "b", joins: 3, minted: 3},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		err := get(s.config)
		if err == nil || err.Error() != "the prober cannot join the tailnet: control says no" {
			t.Errorf("%s\nerror: %v", s.reason, err)
		}
		if joins != s.joins || api.minted != s.minted {
			t.Errorf("%s\njoins %d, keys minted %d; want %d, %d", s.reason, joins, api.minted, s.joins, s.minted)
		}
	}
}

// TestTagPolicyRelayDevice: the prober knocks only on a relay's device whose tags the
// provider config's policy allows; the device ID comes from a state Secret
// the tenant may write.
func TestTagPolicyRelayDevice(t *testing.T) {
	cases := map[string]struct {
		reason  string
		tags    []string
		allowed []string
		want    bool
	}{
		"Untagged":         {reason: "A policy that names no tags restricts nothing: an untagged device is probed.", want: true},
		"UntaggedInPolicy": {reason: "Under a policy naming tags, an untagged device (a person's) is not probed, though the empty set is a subset of any.", allowed: []string{"tag:relay"}, want: false},
		"NoPolicy":         {reason: "A tagged device is probed when the policy names no tags.", tags: []string{"tag:relay"}, want: true},
		"Allowed":          {reason: "A device with allowed tags only is probed.", tags: []string{"tag:relay"}, allowed: []string{"tag:relay", "tag:b"}, want: true},
		"Outside":          {reason: "A device with a tag the policy does not give is not.", tags: []string{"tag:relay", "tag:other"}, allowed: []string{"tag:relay"}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tagPolicy(tc.allowed).relayDevice(tc.tags); got != tc.want {
				t.Errorf("%s\nrelayDevice(%v) under %v = %v, want %v", tc.reason, tc.tags, tc.allowed, got, tc.want)
			}
		})
	}
}

// TestProbeQueueFair: a namespace with a hundred replicas to probe holds
// at most probesPerNamespace workers, and another namespace's probe is
// next in turn, not behind the hundred; a RelayConfig is queued once.
func TestProbeQueueFair(t *testing.T) {
	q := newProbeQueue()
	job := func(ns string, i int) probeJob {
		return probeJob{rc: types.NamespacedName{Namespace: ns, Name: fmt.Sprint("r-", i)}, uid: types.UID(fmt.Sprint(ns, i))}
	}
	for i := range 100 {
		q.push(job("hostile", i))
		q.push(job("hostile", i))
	}
	q.push(job("victim", 0))
	var popped []string
	for {
		j, ok := q.pop()
		if !ok {
			break
		}
		popped = append(popped, j.rc.Namespace)
	}
	if want := []string{"hostile", "victim", "hostile"}; !slices.Equal(popped, want) {
		t.Fatalf("popped %v with every worker free; want %v: the victim next in turn, the hostile namespace at its %d workers", popped, want, probesPerNamespace)
	}
	q.finish(job("hostile", 0))
	if j, ok := q.pop(); !ok || j.rc.Namespace != "hostile" {
		t.Errorf("a finished probe frees its namespace's worker: popped %v, %v", j.rc, ok)
	}
	n := 0
	for _, w := range q.waiting {
		n += len(w)
	}
	if n != 97 {
		t.Errorf("%d probes wait; want 97: each RelayConfig is queued once", n)
	}
}

// TestProbeQueueKeepsTheNewest: a change asked for while a RelayConfig's
// probe waits replaces it; one asked for while it runs follows it. None is
// lost, and the RelayConfig still has one probe at a time.
func TestProbeQueueKeepsTheNewest(t *testing.T) {
	q := newProbeQueue()
	job := func(key string) probeJob {
		return probeJob{rc: types.NamespacedName{Namespace: "team-a", Name: "r-0"}, uid: "r-0", key: key}
	}
	q.push(job("old"))
	q.push(job("new"))
	j, ok := q.pop()
	if !ok || j.key != "new" {
		t.Fatalf("popped %q, %v; want the newest, new", j.key, ok)
	}
	q.push(job("newer"))
	if j, ok := q.pop(); ok {
		t.Fatalf("popped %q while the RelayConfig's probe runs", j.key)
	}
	q.finish(j)
	if j, ok := q.pop(); !ok || j.key != "newer" {
		t.Fatalf("after the running probe: popped %q, %v; want newer", j.key, ok)
	}
}

// TestProberBound: the provider keeps at most maxProbers probers for
// ClusterProviderConfigs and, apart from them, maxNamespacedProbers for
// namespaced ProviderConfigs, one per namespace: a tenant with many
// namespaced ProviderConfigs takes no ClusterProviderConfig's slot. One no
// RelayConfig asked for in proberIdle is logged out and makes room.
func TestProberBound(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	ps := newProbers()
	ps.now = func() time.Time { return now }
	for i := range maxNamespacedProbers {
		ns := fmt.Sprint("tenant-", i)
		if _, err := ps.entry("ProviderConfig/"+ns+"/p", "c", ns); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ps.entry("ProviderConfig/tenant-0/q", "c", "tenant-0"); err == nil {
		t.Error("a second namespaced ProviderConfig's prober joined in one namespace; want one per namespace")
	}
	if _, err := ps.entry("ProviderConfig/tenant-x/p", "c", "tenant-x"); err == nil {
		t.Errorf("namespaced prober %d joined; want the bound of %d", maxNamespacedProbers+1, maxNamespacedProbers)
	}
	for i := range maxProbers {
		if _, err := ps.entry(fmt.Sprint("ClusterProviderConfig/team-", i), "c", ""); err != nil {
			t.Fatalf("ClusterProviderConfig prober %d beside %d namespaced ones: %v", i+1, maxNamespacedProbers, err)
		}
		now = now.Add(time.Minute)
	}
	if _, err := ps.entry("ClusterProviderConfig/one-more", "c", ""); err == nil {
		t.Fatalf("prober %d joined; want the bound of %d", maxProbers+1, maxProbers)
	}
	if _, err := ps.entry("ClusterProviderConfig/team-3", "c", ""); err != nil {
		t.Errorf("a prober already kept is refused: %v", err)
	}
	now = now.Add(proberIdle - time.Duration(maxProbers-1)*time.Minute + time.Second)
	if _, err := ps.entry("ClusterProviderConfig/one-more", "c", ""); err != nil {
		t.Fatalf("with the first prober idle for %s: %v", proberIdle, err)
	}
	if _, kept := ps.joined["ClusterProviderConfig/team-0"]; kept {
		t.Error("the idle prober is kept")
	}
	if _, kept := ps.joined["ClusterProviderConfig/team-3"]; !kept {
		t.Error("a prober used since is logged out")
	}
}
