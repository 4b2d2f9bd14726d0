package crossplane

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/peerrelay/peerrelay/test/harness"
)

// seen is one version of an object and when its watch event arrived.
type seen struct {
	at  time.Time
	obj *unstructured.Unstructured
}

// follower watches resources in one namespace and keeps every version of
// every object with its arrival time, so that a benchmark can say when a
// condition first held: what a user running `kubectl wait` would see.
type follower struct {
	mu       sync.Mutex
	versions map[string][]seen // resource/name
	changed  chan struct{}     // closed on every change
}

var (
	gvrPeerRelays   = schema.GroupVersionResource{Group: "peerrelay.io", Version: "v1alpha1", Resource: "peerrelays"}
	gvrSecrets      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrPods         = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrRelayConfigs = schema.GroupVersionResource{Group: "relay.peerrelay.io", Version: "v1alpha1", Resource: "relayconfigs"}
)

// follow starts following gvrs in ns (harness.Follow) until the benchmark
// ends; it returns once each has listed, from when no change is missed: a
// lost event would leave a benchmark waiting for a version it missed.
func (s *system) follow(t testing.TB, ns string, gvrs ...schema.GroupVersionResource) *follower {
	f := &follower{versions: map[string][]seen{}, changed: make(chan struct{})}
	dc := dynamic.NewForConfigOrDie(s.AdminConfig)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, gvr := range gvrs {
		synced := make(chan struct{})
		var once sync.Once
		wg.Go(func() {
			harness.Follow(ctx, harness.ListWatch(dc.Resource(gvr).Namespace(ns)), func(ev watch.Event) {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					f.add(gvr.Resource+"/"+u.GetName(), u)
				}
			}, func() { once.Do(func() { close(synced) }) })
		})
		select {
		case <-synced:
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatalf("cannot list %s in %s", gvr.Resource, ns)
		}
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return f
}

func (f *follower) add(key string, u *unstructured.Unstructured) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions[key] = append(f.versions[key], seen{at: time.Now(), obj: u})
	close(f.changed)
	f.changed = make(chan struct{})
}

// first returns when the first version of resource/name for which ok holds
// arrived, waiting up to timeout for one.
func (f *follower) first(key string, timeout time.Duration, ok func(*unstructured.Unstructured) bool) (time.Time, error) {
	deadline := time.After(timeout)
	for checked := 0; ; {
		f.mu.Lock()
		vs, ch := f.versions[key], f.changed
		f.mu.Unlock()
		for ; checked < len(vs); checked++ {
			if ok(vs[checked].obj) {
				return vs[checked].at, nil
			}
		}
		select {
		case <-ch:
		case <-deadline:
			var last any = "none"
			if len(vs) > 0 {
				last = vs[len(vs)-1].obj.Object["status"]
			}
			return time.Time{}, fmt.Errorf("%s: no version in %v matched; last status: %v", key, timeout, last)
		}
	}
}

// trueAt returns when the first version of each of keys with condition
// typ True arrived, and the latest of those times.
func (f *follower) trueAt(keys []string, typ xpv2.ConditionType, timeout time.Duration) (time.Time, error) {
	var last time.Time
	for _, k := range keys {
		at, err := f.first(k, timeout, func(u *unstructured.Unstructured) bool {
			st, _ := condition(u, typ)
			return st == "True"
		})
		if err != nil {
			return time.Time{}, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last, nil
}

// all returns the versions of resource/name seen so far.
func (f *follower) all(key string) []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.versions[key]...)
}
