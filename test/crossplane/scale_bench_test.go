package crossplane

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
)

// BenchmarkSystemScale creates SCALE_PEERRELAYS (comma-separated; default
// 10,100,300) PeerRelays of SCALE_REPLICAS (default 3) replicas at once on
// one Crossplane and reports, for each count: the time until every one is
// PeerRelayReady; the CPU seconds and peak RSS of our function, our provider
// and Crossplane core, in all and per PeerRelay (the growth of the peak over
// the idle system's, divided by the count); the writes per RelayConfig and
// per PeerRelay; and the watch circuit
// breakers that opened (which fails the benchmark). Then, for STEADY
// (default 5m) with nothing changing: writes, function calls and CPU per
// minute. Each count gets a system of its own, so peak RSS is that run's.
// The node is hollow (pods are reported Ready without running): this
// machine cannot run 900 tailscaleds, and what is measured is the control
// plane a platform pays for.
func BenchmarkSystemScale(b *testing.B) {
	counts := envInts(b, "SCALE_PEERRELAYS", []int{10, 100, 300})
	replicas := envInts(b, "SCALE_REPLICAS", []int{3})[0]
	steady := envDuration(b, "STEADY", 5*time.Minute)
	for _, n := range counts {
		b.Run(fmt.Sprintf("peerrelays=%d/replicas=%d", n, replicas), func(b *testing.B) {
			for b.Loop() {
				scaleRun(b, n, replicas, steady)
			}
		})
	}
}

func scaleRun(b *testing.B, n, replicas int, steady time.Duration) {
	const ns = "scale"
	s := startInstalled(b, options{bench: true, hollow: true})
	s.namespaceWithKey(b, ns)
	f := s.follow(b, ns, gvrPeerRelays)
	procs := s.processes()
	before := sample(b, procs)

	start := time.Now()
	s.createPeerRelays(b, ns, n, replicas)
	relays := make([]string, n)
	for i := range n {
		relays[i] = fmt.Sprintf("peerrelays/relay-%d", i)
	}
	last, err := f.trueAt(relays, v1alpha1.ConditionPeerRelayReady, 30*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(last.Sub(start).Seconds(), "all-ready-s")
	// What is in flight lands (Crossplane's last status writes, the
	// provider's last observation) before the writes are counted.
	time.Sleep(10 * time.Second)
	converged := sample(b, procs)
	for _, p := range procs {
		b.ReportMetric(converged[p.short].cpu-before[p.short].cpu, p.short+"-cpu-s")
		b.ReportMetric(converged[p.short].hwmMiB, p.short+"-peak-MiB")
		b.ReportMetric(1000*(converged[p.short].cpu-before[p.short].cpu)/float64(n), p.short+"-cpu-ms/PeerRelay")
		b.ReportMetric(1024*(converged[p.short].hwmMiB-before[p.short].hwmMiB)/float64(n), p.short+"-peak-KiB/PeerRelay")
	}
	rcWrites, xrWrites := s.writes.writesOf("relayconfigs", ns), s.writes.writesOf("peerrelays", ns)
	if len(rcWrites) != n*replicas || len(xrWrites) != n {
		b.Fatalf("writes counted for %d RelayConfigs and %d PeerRelays, want %d and %d", len(rcWrites), len(xrWrites), n*replicas, n)
	}
	b.ReportMetric(mean(rcWrites), "writes/RelayConfig")
	b.ReportMetric(mean(xrWrites), "writes/PeerRelay")
	s.noBreakerOpened(b)

	time.Sleep(steady)
	after := sample(b, procs)
	minutes := steady.Minutes()
	b.ReportMetric(float64(total(s.writes.writesOf("relayconfigs", ns))-total(rcWrites))/minutes, "steady-RelayConfig-writes/min")
	b.ReportMetric(float64(total(s.writes.writesOf("peerrelays", ns))-total(xrWrites))/minutes, "steady-PeerRelay-writes/min")
	b.ReportMetric(float64(after["function"].calls-converged["function"].calls)/minutes, "steady-function-calls/min")
	for _, p := range procs {
		b.ReportMetric((after[p.short].cpu-converged[p.short].cpu)/minutes, "steady-"+p.short+"-cpu-s/min")
	}
}

// createPeerRelays creates relay-0 … relay-(n-1) in ns at once: eight
// clients in parallel, as many teams applying theirs.
func (s *system) createPeerRelays(b *testing.B, ns string, n, replicas int) {
	dc := dynamic.NewForConfigOrDie(s.AdminConfig)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				u := &unstructured.Unstructured{}
				manifest := fmt.Sprintf("apiVersion: %s\nkind: PeerRelay\nmetadata: {name: relay-%d, namespace: %s}\nspec: {replicas: %d, authKeySecretRef: {name: tailscale-auth}}\n", v2API, i, ns, replicas)
				if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
					errs <- err
					continue
				}
				if _, err := dc.Resource(gvrPeerRelays).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create relay-%d: %w", i, err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// measured is one process the scale benchmark reports on.
type measured struct {
	short string
	p     *harness.Process
}

func (s *system) processes() []measured {
	return []measured{{"function", s.runtime.Function}, {"provider", s.runtime.Provider()}, {"crossplane", s.Core}}
}

// usage is what /proc says of a process: CPU seconds (user and system),
// peak RSS, and for the function the calls it has logged.
type usage struct {
	cpu, hwmMiB float64
	calls       int
}

func sample(b *testing.B, procs []measured) map[string]usage {
	out := map[string]usage{}
	for _, m := range procs {
		u, err := procUsage(m.p.Pid())
		if err != nil {
			b.Fatalf("%s: %v", m.short, err)
		}
		if m.short == "function" {
			// One debug line per RunFunction call.
			u.calls = strings.Count(m.p.Log.String(), "\tcomposed\t")
		}
		out[m.short] = u
	}
	return out
}

func procUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are fields 14 and 15 of the whole line.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, err
	}
	var hwm float64
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			hwm = kb / 1024
		}
	}
	// USER_HZ is 100 on Linux.
	return usage{cpu: (utime + stime) / 100, hwmMiB: hwm}, nil
}

func mean(m map[string]int) float64 {
	if len(m) == 0 {
		return 0
	}
	return float64(total(m)) / float64(len(m))
}

func total(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// envInts reads a benchmark's comma-separated counts from the environment
// (e.g. SCALE_PEERRELAYS=10,100,300), or gives def.
func envInts(b *testing.B, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want positive counts such as 10,100,300", name, v)
		}
		out = append(out, n)
	}
	return out
}

// envDuration reads a benchmark's duration from the environment (e.g.
// STEADY=5m), or gives def.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}
