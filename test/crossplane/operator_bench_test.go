package crossplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// BenchmarkSideBySide: our packages through real Crossplane and the
// Tailscale operator's PeerRelay reconciler (startOperator) on one API
// server, one hollow node and one cloud, each given the same work in
// alternating trials, so that every figure of one has its peer's from the
// same minutes of the same machine:
//
//   - lb-address: a replica's Service gets a new load balancer address →
//     its config Secret advertises it → its PeerRelay's status.endpoints
//     shows it. Events alternate between the systems and go round-robin
//     over relays single-replica PeerRelays of each.
//   - apply/replicas=N (N from $SIDE_REPLICAS, 1,10,30): a new N-replica
//     PeerRelay → every replica's config Secret advertises its address →
//     PeerRelayReady=True (pods are reported Ready at once by the hollow
//     node). Each system's PeerRelay is deleted before the next trial. For
//     ours, the watch circuit breaker's tokens its events took until ready
//     (an upper bound: Crossplane maps a composed object's events to its
//     XR only once a pass has recorded it, so most creations cost none)
//     and how many of its PeerRelays had the breaker open.
//   - resync/replicas=N (only with $RESYNC=N, and CROSSPLANE_ARGS naming a
//     short --sync-interval): a ready N-replica PeerRelay at rest for $REST
//     through Crossplane's informer resync.
//   - writes: API write requests per address change, from kube-apiserver's
//     audit log (every write but lease renewals; audited), counted for the
//     changed relay's objects in the 3 s after its change, the benchmark's
//     own writes left out; then both at rest for $REST (1m), each system's
//     write requests and object changes (watch events of its objects).
func BenchmarkSideBySide(b *testing.B) {
	s := startInstalled(b, options{bench: true, hollow: true, audit: true})
	s.startOperator(b)
	const ns, relays = "bench-side", 10
	s.namespaceWithKey(b, ns)
	sys := []*sideSystem{
		{name: "peerrelay", namespace: ns, objects: s.follow(b, ns, gvrPeerRelays, gvrSecrets, gvrRelayConfigs)},
		{name: "operator", namespace: operatorNamespace, objects: s.follow(b, operatorNamespace, gvrSecrets), relays: s.follow(b, "", gvrOperatorPeerRelays)},
	}
	sys[0].relays = sys[0].objects
	sys[0].apply = func(b *testing.B, name string, replicas int) {
		s.applyPeerRelay(b, ns, name, fmt.Sprintf("replicas: %d\nauthKeySecretRef: {name: tailscale-auth}", replicas))
	}
	sys[1].apply = func(b *testing.B, name string, replicas int) { s.applyOperatorPeerRelay(b, name, replicas) }
	sys[0].delete = func(b *testing.B, name string) {
		s.mustKubectl(b, "-n", ns, "delete", "peerrelay.peerrelay.io", name, "--wait=true", "--timeout=3m")
	}
	sys[1].delete = func(b *testing.B, name string) {
		s.mustKubectl(b, "delete", "peerrelay.tailscale.com", name, "--wait=true", "--timeout=3m")
	}
	sys[0].service = func(relay string, i int) (string, string, string) {
		return ns, fmt.Sprintf("%s-%d", relay, i), fmt.Sprintf("secrets/%s-%d-config", relay, i)
	}
	sys[1].service = func(relay string, i int) (string, string, string) {
		return operatorNamespace, fmt.Sprintf("peerrelay-%s-%d", relay, i), fmt.Sprintf("secrets/peerrelay-%s-%d-config", relay, i)
	}

	for _, x := range sys {
		for i := range relays {
			x.apply(b, fmt.Sprintf("lb-%d", i), 1)
		}
	}
	for _, x := range sys {
		for i := range relays {
			if err := x.ready(fmt.Sprintf("lb-%d", i), 1, 3*time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	}

	event := 0
	change := func(b *testing.B, x *sideSystem) (config, status time.Duration) {
		relay := fmt.Sprintf("lb-%d", event%relays)
		ip := fmt.Sprintf("198.18.%d.%d", event/250, event%250+1)
		event++
		svcNS, svc, _ := x.service(relay, 0)
		start := time.Now()
		if err := s.cloud.setAddress(b.Context(), svcNS, svc, ip); err != nil {
			b.Fatal(err)
		}
		cfg, st, err := x.advertised(relay, 0, ip, 30*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		return cfg.Sub(start), st.Sub(start)
	}

	b.Run("lb-address", func(b *testing.B) {
		toConfig, toStatus := map[string][]time.Duration{}, map[string][]time.Duration{}
		i := 0
		for b.Loop() {
			// Alternate which system goes first.
			for _, x := range []*sideSystem{sys[i%2], sys[(i+1)%2]} {
				c, st := change(b, x)
				toConfig[x.name], toStatus[x.name] = append(toConfig[x.name], c), append(toStatus[x.name], st)
			}
			i++
		}
		for _, x := range sys {
			reportPercentiles(b, x.name+"-config", toConfig[x.name])
			reportPercentiles(b, x.name+"-status", toStatus[x.name])
		}
		// A breaker's figures would be the breaker's, not ours.
		if n := s.breakersOpened(ns, "lb-"); n > 0 {
			b.Errorf("watch circuit breakers opened: %v", s.writes.unresponsiveXRs())
		}
	})

	for _, replicas := range envInts(b, "SIDE_REPLICAS", []int{1, 10, 30}) {
		b.Run(fmt.Sprintf("apply/replicas=%d", replicas), func(b *testing.B) {
			toConfigured, toReady := map[string][]time.Duration{}, map[string][]time.Duration{}
			var tokens []int
			wouldOpen, i := 0, 0
			for b.Loop() {
				for _, x := range []*sideSystem{sys[i%2], sys[(i+1)%2]} {
					name := fmt.Sprintf("apply-%d-%d", replicas, i)
					start := time.Now()
					x.apply(b, name, replicas)
					configured, err := x.configured(name, replicas, 3*time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					ready, err := x.relays.trueAt([]string{"peerrelays/" + name}, v1alpha1.ConditionPeerRelayReady, 3*time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					toConfigured[x.name], toReady[x.name] = append(toConfigured[x.name], configured.Sub(start)), append(toReady[x.name], ready.Sub(start))
					if x.name == "peerrelay" {
						// What Crossplane's watch circuit breaker counted.
						t := s.writes.breakerTokens(ns, name)
						tokens = append(tokens, total(t))
						if s.writes.breakerWouldOpen(ns, name, start) {
							wouldOpen++
						}
						if i < 2 {
							b.Logf("%s: breaker tokens until ready, by resource: %v", name, t)
						}
					}
					b.StopTimer()
					x.delete(b, name)
					b.StartTimer()
				}
				i++
			}
			for _, x := range sys {
				reportPercentiles(b, x.name+"-configured", toConfigured[x.name])
				reportPercentiles(b, x.name+"-ready", toReady[x.name])
			}
			// A user applying many replicas at once can meet Crossplane's
			// watch circuit breaker: that is part of what they wait for,
			// so it is counted, not refused.
			b.ReportMetric(float64(s.breakersOpened(ns, fmt.Sprintf("apply-%d-", replicas))), "peerrelay-breakers-opened")
			slices.Sort(tokens)
			b.ReportMetric(float64(tokens[len(tokens)/2]), "peerrelay-breaker-tokens-p50")
			// Whether Crossplane's default bucket would have run dry, replayed
			// from the watch events: the figure for the default flags when a
			// run tunes them (CROSSPLANE_ARGS).
			b.ReportMetric(float64(wouldOpen), "peerrelay-breakers-default-would-open")
		})
	}

	// resync/replicas=N (N from $RESYNC, with CROSSPLANE_ARGS naming a
	// short --sync-interval): a ready N-replica PeerRelay at rest through
	// Crossplane's informer resync, which replays every object it composes
	// as an update.
	if n := envInts(b, "RESYNC", nil); len(n) > 0 {
		b.Run(fmt.Sprintf("resync/replicas=%d", n[0]), func(b *testing.B) {
			// Once, whatever -benchtime says: it waits out $REST.
			for range 1 {
				name := fmt.Sprintf("resync-%d", n[0])
				sys[0].apply(b, name, n[0])
				if err := sys[0].ready(name, n[0], 5*time.Minute); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				before := total(s.writes.breakerTokens(ns, name))
				time.Sleep(envDuration(b, "REST", time.Minute))
				b.Logf("%s: breaker tokens at rest, by resource: %v", name, s.writes.breakerTokens(ns, name))
				b.ReportMetric(float64(total(s.writes.breakerTokens(ns, name))-before), "peerrelay-breaker-tokens-at-rest")
				opened := 0
				if s.writes.breakerWouldOpen(ns, name, start) {
					opened = 1
				}
				b.ReportMetric(float64(opened), "peerrelay-breaker-would-open")
				b.ReportMetric(float64(s.breakersOpened(ns, name)), "peerrelay-breakers-opened")
				b.StopTimer()
				sys[0].delete(b, name)
				b.StartTimer()
			}
		})
	}

	b.Run("writes", func(b *testing.B) {
		writes, changes := map[string]int{}, 0
		for b.Loop() {
			changes++
			for _, x := range sys {
				relay := fmt.Sprintf("lb-%d", event%relays)
				start := time.Now()
				change(b, x)
				// What the change sets off settles well within this: the
				// status write comes last, hundreds of milliseconds after.
				time.Sleep(3 * time.Second)
				w := s.audited(b, start, time.Now(), x.writerOf(relay))
				writes[x.name] += total(w)
				if changes == 1 {
					b.Logf("%s: the writes of one address change: %v", x.name, w)
				}
			}
		}
		for _, x := range sys {
			b.ReportMetric(float64(writes[x.name])/float64(changes), x.name+"-writes/change")
		}
		rest := envDuration(b, "REST", time.Minute)
		start, before := time.Now(), map[string]int{}
		for _, x := range sys {
			before[x.name] = x.changes()
		}
		time.Sleep(rest)
		for _, x := range sys {
			w := s.audited(b, start, time.Now(), x.writerOf(""))
			if len(w) > 0 {
				b.Logf("%s: the writes at rest over %v: %v", x.name, rest, w)
				b.Logf("%s: the writes at rest by object: %v", x.name, s.auditedByObject(b, start, time.Now(), x.writerOf("")))
			}
			b.ReportMetric(float64(total(w))/rest.Minutes(), x.name+"-at-rest-writes/min")
			b.ReportMetric(float64(x.changes()-before[x.name])/rest.Minutes(), x.name+"-at-rest-changes/min")
		}
	})
}

// breakersOpened is how many of our PeerRelays whose name starts with
// prefix had Crossplane's watch circuit breaker open.
func (s *system) breakersOpened(ns, prefix string) int {
	n := 0
	for k := range s.writes.unresponsiveXRs() {
		if strings.HasPrefix(k, "peerrelays "+ns+"/"+prefix) {
			n++
		}
	}
	return n
}

// sideSystem is one of the two systems BenchmarkSideBySide drives.
type sideSystem struct {
	name      string
	namespace string    // where its PeerRelays' objects are
	objects   *follower // its config Secrets (and, for ours, PeerRelays)
	relays    *follower // its PeerRelays
	apply     func(b *testing.B, name string, replicas int)
	delete    func(b *testing.B, name string)
	// service returns the namespace and name of relay's replica i's
	// Service, and the follower key of its config Secret.
	service func(relay string, i int) (ns, svc, configKey string)
}

// writerOf says whether an audited write is to one of the system's
// objects: of relay (its PeerRelay, what it composes or owns, their
// events), or of any of its PeerRelays when relay is "".
func (x *sideSystem) writerOf(relay string) func(auditEvent) bool {
	return func(e auditEvent) bool {
		ns, name := e.ObjectRef.Namespace, e.ObjectRef.Name
		if x.name == "operator" {
			if ns != operatorNamespace && e.ObjectRef.APIGroup != "tailscale.com" {
				return false
			}
			name = strings.TrimPrefix(name, "peerrelay-")
		} else if ns != x.namespace {
			return false
		}
		return relay == "" || name == relay || strings.HasPrefix(name, relay+"-") || strings.HasPrefix(name, relay+".")
	}
}

// changes is the number of versions of its objects seen so far.
func (x *sideSystem) changes() int {
	if x.objects == x.relays {
		return x.objects.count()
	}
	return x.objects.count() + x.relays.count()
}

// advertised returns when replica i's config Secret first advertised ip
// and when the PeerRelay's status.endpoints first showed it.
func (x *sideSystem) advertised(relay string, i int, ip string, timeout time.Duration) (config, status time.Time, err error) {
	_, _, key := x.service(relay, i)
	if config, err = x.objects.first(key, timeout, secretAdvertises(ip)); err != nil {
		return
	}
	status, err = x.relays.first("peerrelays/"+relay, timeout, func(u *unstructured.Unstructured) bool {
		eps, _, _ := unstructured.NestedSlice(u.Object, "status", "endpoints")
		return slices.ContainsFunc(eps, func(e any) bool { m, _ := e.(map[string]any); return m["address"] == ip })
	})
	return
}

// configured returns when the last of relay's replicas' config Secrets
// advertised an address.
func (x *sideSystem) configured(relay string, replicas int, timeout time.Duration) (time.Time, error) {
	var last time.Time
	for i := range replicas {
		_, _, key := x.service(relay, i)
		at, err := x.objects.first(key, timeout, secretAdvertises("203.0.113."))
		if err != nil {
			return time.Time{}, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last, nil
}

// ready waits until relay's replicas are configured and it is
// PeerRelayReady.
func (x *sideSystem) ready(relay string, replicas int, timeout time.Duration) error {
	if _, err := x.configured(relay, replicas, timeout); err != nil {
		return err
	}
	_, err := x.relays.trueAt([]string{"peerrelays/" + relay}, v1alpha1.ConditionPeerRelayReady, timeout)
	return err
}

// secretAdvertises says whether a config Secret's tailscaled config lists
// an endpoint whose address starts with prefix.
func secretAdvertises(prefix string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		data, _, _ := unstructured.NestedStringMap(u.Object, "data")
		for _, v := range data {
			if strings.Contains(decode(v), `"`+prefix) {
				return true
			}
		}
		return false
	}
}

// count is the number of versions the follower has seen.
func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, vs := range f.versions {
		n += len(vs)
	}
	return n
}

// auditEvent is what BenchmarkSideBySide reads of an audit log line.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// audited counts the writes in kube-apiserver's audit log answered between
// from and to that mine says are of interest, by writer (its user agent's
// program), verb and resource. The benchmark's own writes (the cloud's,
// kubectl's) are not counted.
func (s *system) audited(b *testing.B, from, to time.Time, mine func(auditEvent) bool) map[string]int {
	b.Helper()
	n := map[string]int{}
	s.eachAudited(b, from, to, func(e auditEvent, writer string) {
		if mine(e) {
			n[fmt.Sprintf("%s %s %s", writer, e.Verb, strings.TrimSuffix(e.ObjectRef.Resource+"/"+e.ObjectRef.Subresource, "/"))]++
		}
	})
	return n
}

// eachAudited calls f with every write in kube-apiserver's audit log
// answered between from and to, and its writer (its user agent's
// program), but the benchmark's own (the cloud's, kubectl's).
func (s *system) eachAudited(b *testing.B, from, to time.Time, f func(e auditEvent, writer string)) {
	b.Helper()
	file, err := os.Open(s.auditLog)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	self := filepath.Base(os.Args[0]) + "/"
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			b.Fatal(err)
		}
		if e.StageTimestamp.Before(from) || e.StageTimestamp.After(to) || strings.HasPrefix(e.UserAgent, self) || strings.HasPrefix(e.UserAgent, "kubectl/") {
			continue
		}
		writer, _, _ := strings.Cut(e.UserAgent, "/")
		f(e, writer)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
}

// auditedByObject is audited keyed by object instead: writer, verb and
// resource/name, for the writes at rest.
func (s *system) auditedByObject(b *testing.B, from, to time.Time, mine func(auditEvent) bool) map[string]int {
	b.Helper()
	n := map[string]int{}
	s.eachAudited(b, from, to, func(e auditEvent, writer string) {
		if mine(e) {
			n[fmt.Sprintf("%s %s %s/%s", writer, e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name)]++
		}
	})
	return n
}

// mustKubectl runs kubectl and fails the benchmark if it fails.
func (s *system) mustKubectl(b testing.TB, args ...string) {
	b.Helper()
	if out, err := s.Kubectl(b, args...); err != nil {
		b.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
