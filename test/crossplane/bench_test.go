package crossplane

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// The benchmarks below measure what a user waits for, through the system
// TestCrossplane tests: a real Crossplane core with our packages installed
// as the README says, run as a platform runs them (no debug logs,
// Crossplane's default one-minute poll). `make bench` runs them.

// BenchmarkLBAddressToEndpoint: a load balancer address appears on a
// replica's Service (as when its NLB is replaced) → the replica's config
// Secret advertises it (the provider), and → the PeerRelay's
// status.endpoints shows it (Crossplane and the function). One event per
// iteration, round-robin over lbRelays ready PeerRelays: an address changes
// a few times in a relay's life, and Crossplane's per-XR watch circuit
// breaker (refilled at one event a second) would open under a change every
// fraction of a second on one PeerRelay, which no user makes. The node is
// hollow: nothing here waits for a pod (TestCrossplane/Pods shows a running
// tailscaled taking a new address without a restart).
func BenchmarkLBAddressToEndpoint(b *testing.B) {
	s := startInstalled(b, options{bench: true, hollow: true})
	const ns, lbRelays = "bench-lb", 20
	s.namespaceWithKey(b, ns)
	f := s.follow(b, ns, gvrPeerRelays, gvrSecrets, gvrRelayConfigs)
	s.createPeerRelays(b, ns, lbRelays, 1)
	for i := range lbRelays {
		s.waitReady(b.Context(), b, ns, fmt.Sprintf("relay-%d", i), 3*time.Minute)
	}

	var toConfig, toRelayConfig, toStatus []time.Duration
	i := 0
	for b.Loop() {
		name := fmt.Sprintf("relay-%d", i%lbRelays)
		ip := fmt.Sprintf("198.18.%d.%d", i/250, i%250+1)
		i++
		start := time.Now()
		if err := s.cloud.setAddress(b.Context(), ns, name+"-0", ip); err != nil {
			b.Fatal(err)
		}
		cfg, err := f.first("secrets/"+name+"-0-config", 30*time.Second, func(u *unstructured.Unstructured) bool {
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for _, v := range data {
				if strings.Contains(decode(v), `"`+ip+`:`) {
					return true
				}
			}
			return false
		})
		if err != nil {
			b.Fatal(err)
		}
		// The provider's status write, which Crossplane's realtime watch
		// turns into a reconcile of the PeerRelay.
		rc, err := f.first("relayconfigs/"+name+"-0", 30*time.Second, func(u *unstructured.Unstructured) bool {
			eps, _, _ := unstructured.NestedStringSlice(u.Object, "status", "atProvider", "endpoints")
			return slices.ContainsFunc(eps, func(e string) bool { return strings.HasPrefix(e, ip+":") })
		})
		if err != nil {
			b.Fatal(err)
		}
		st, err := f.first("peerrelays/"+name, 30*time.Second, func(u *unstructured.Unstructured) bool {
			eps, _, _ := unstructured.NestedSlice(u.Object, "status", "endpoints")
			return slices.ContainsFunc(eps, func(e any) bool { m, _ := e.(map[string]any); return m["address"] == ip })
		})
		if err != nil {
			b.Fatal(err)
		}
		toConfig, toRelayConfig, toStatus = append(toConfig, cfg.Sub(start)), append(toRelayConfig, rc.Sub(start)), append(toStatus, st.Sub(start))
	}
	reportPercentiles(b, "config", toConfig)
	reportPercentiles(b, "relayconfig", toRelayConfig)
	reportPercentiles(b, "status", toStatus)
	s.noBreakerOpened(b)
}

// BenchmarkApplyToReady: `kubectl apply` of a 3-replica PeerRelay → every
// object it composes exists (the XR's resourceRefs complete); the last of
// its pods turns Ready → PeerRelayReady=True; and apply → PeerRelayReady.
// Each iteration applies a new PeerRelay and deletes it afterwards, with
// its pods running real containerboot and tailscaled.
func BenchmarkApplyToReady(b *testing.B) {
	s := startInstalled(b, options{bench: true})
	const ns, replicas = "bench-apply", 3
	s.namespaceWithKey(b, ns)
	f := s.follow(b, ns, gvrPeerRelays, gvrPods)
	var composed, podToReady, applyToReady []time.Duration
	i := 0
	for b.Loop() {
		name := fmt.Sprintf("apply-%d", i)
		i++
		start := time.Now()
		s.applyPeerRelay(b, ns, name, fmt.Sprintf("replicas: %d\nauthKeySecretRef: {name: tailscale-auth}", replicas))
		ready, err := f.trueAt([]string{"peerrelays/" + name}, v1alpha1.ConditionPeerRelayReady, 3*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		versions := f.all("peerrelays/" + name)
		final := len(resourceRefs(versions[len(versions)-1].obj))
		for _, v := range versions {
			if len(resourceRefs(v.obj)) == final {
				composed = append(composed, v.at.Sub(start))
				break
			}
		}
		var pods []string
		for r := range replicas {
			pods = append(pods, fmt.Sprintf("pods/%s-%d-0", name, r))
		}
		lastPod, err := f.trueAt(pods, "Ready", time.Second)
		if err != nil {
			b.Fatal(err)
		}
		podToReady, applyToReady = append(podToReady, ready.Sub(lastPod)), append(applyToReady, ready.Sub(start))

		b.StopTimer()
		if out, err := s.Kubectl(b, "-n", ns, "delete", "peerrelay", name, "--wait=true", "--timeout=3m"); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		b.StartTimer()
	}
	reportPercentiles(b, "composed", composed)
	reportPercentiles(b, "pod-to-ready", podToReady)
	reportPercentiles(b, "apply-to-ready", applyToReady)
	s.noBreakerOpened(b)
}

// noBreakerOpened fails the benchmark if any XR's watch circuit breaker
// opened: its figures would be the breaker's, not ours.
func (s *system) noBreakerOpened(b *testing.B) {
	if open := s.writes.unresponsiveXRs(); len(open) > 0 {
		b.Errorf("watch circuit breakers opened: %v", open)
	}
}

func resourceRefs(u *unstructured.Unstructured) []any {
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "crossplane", "resourceRefs")
	return refs
}

// startInstalled starts a system and installs our packages with the
// README's commands. Their printed tables are TestCrossplane's to check: on
// a hollow node the README's PeerRelay is ready within milliseconds, and
// Crossplane v2.4's XR status loop (crossplane/crossplane#7062) can show a
// stale condition to the `kubectl get` right after the `kubectl wait`.
func startInstalled(b *testing.B, o options) *system {
	s := start(b, o)
	s.readme(b, "## Install on a cluster", false)
	return s
}

// reportPercentiles reports p50 and p99 of ds in milliseconds as
// <what>-p50-ms and <what>-p99-ms.
func reportPercentiles(b *testing.B, what string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), what+"-p50-ms")
	b.ReportMetric(at(0.99), what+"-p99-ms")
}

// decode is a Secret value as the unstructured object holds it (base64).
func decode(v string) string {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return ""
	}
	return string(b)
}
