package crossplane

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"tailscale.com/types/key"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/test/harness"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// previousVersion is the release before this tree's, built from its commit
// by `make xpkg-previous` (Makefile PREVIOUS_COMMIT).
const previousVersion = "v0.1.0"

// previousDir holds the previous release: its tree (src) and its packages
// (xpkg).
func previousDir(t testing.TB) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, ".cache", "previous", previousVersion)
}

// previousPackages are the previous release's package files, by name.
func previousPackages(t testing.TB) map[string][]string {
	t.Helper()
	files := map[string][]string{}
	for _, p := range []string{"function", "provider", "configuration"} {
		name := p + "-peerrelay"
		files[name], _ = filepath.Glob(filepath.Join(previousDir(t), "xpkg", fmt.Sprintf("%s-%s*.xpkg", name, previousVersion)))
		harness.Need(t, len(files[name]) > 0, "the previous release is not built: run `make xpkg-previous`")
	}
	return files
}

// liveRelay is a PeerRelay the upgrade must not disturb.
type liveRelay struct{ ns, name string }

func (r liveRelay) String() string { return r.ns + "/" + r.name }

// TestUpgrade: a platform upgrades from the previous release to this one
// with live relays, as the README says, and rolls back. Through both, every
// relay keeps its device (device ID, node key), no key is minted, every
// RelayConfig and Secret is kept, no pod restarts or goes unready (the two
// releases compose the same pods), no watch circuit breaker opens, and
// PeerRelayReady holds but for Crossplane's FatalError while a Function's
// new revision starts. After each, the packages then running act on a
// scale: the gate of a safe-start provider opened, an old one finalizes.
func TestUpgrade(t *testing.T) {
	s := start(t, options{previous: true})
	ctx := t.Context()
	prev := filepath.Join(previousDir(t), "src")
	if !s.run(t, "InstallPrevious", func(t *testing.T) { s.readmeIn(t, prev, "## Install on a cluster", true) }) {
		return
	}
	s.requirePackages(ctx, t, previousVersion)
	api := s.mintingTailnet(t, "minting")
	minted := liveRelay{"team-mint", "minted"}
	if out, err := s.Kubectl(t, "create", "namespace", minted.ns); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	s.applyPeerRelay(t, minted.ns, minted.name, "replicas: 2\ntailnet: minting")
	s.waitReady(ctx, t, minted.ns, minted.name, 3*time.Minute)
	relays := []liveRelay{{"team-a", "my-relay"}, minted}
	keys := func() int { return countCalls(api, "POST", "/api/v2/tailnet/-/keys") }

	// After each step the packages now running act: after the upgrade a
	// new replica joins with a key of its own (the new provider's gate
	// opened, the new function composes), after the roll-back a replica
	// goes and its RelayConfig with it (the old provider finalizes it).
	scale := func(t *testing.T, replicas, wantKeys int) {
		t.Helper()
		n := keys()
		s.applyPeerRelay(t, minted.ns, minted.name, fmt.Sprintf("replicas: %d\ntailnet: minting", replicas))
		harness.Eventually(t, 3*time.Minute, fmt.Sprintf("%d replicas ready, %d RelayConfigs", replicas, replicas), func(ctx context.Context) error {
			_, _, down, err := s.relayNow(ctx, minted)
			if err != nil {
				return err
			}
			rcs, err := s.List(ctx, relayAPI, "RelayConfig", minted.ns)
			if err == nil && (down > 0 || len(rcs) != replicas) {
				err = fmt.Errorf("%d replicas not ready, %d RelayConfigs", down, len(rcs))
			}
			return err
		})
		s.waitReady(ctx, t, minted.ns, minted.name, 3*time.Minute)
		if got := keys() - n; got != wantKeys {
			t.Errorf("keys minted going to %d replicas: %d, want %d: %v", replicas, got, wantKeys, keyCalls(api, n))
		}
	}
	for _, step := range []struct {
		name, block, version     string
		replicasAfter, keysAfter int
	}{
		{"Upgrade", "### Upgrade", version, 3, 1},
		{"RollBack", "### Roll back", previousVersion, 2, 0},
	} {
		ok := s.run(t, step.name, func(t *testing.T) {
			// Crossplane v2.4 may re-apply stale conditions for a moment
			// right after they changed (crossplane/crossplane#7062): the
			// watch starts once each PeerRelay has been ready for 10 s.
			for _, r := range relays {
				s.waitReady(ctx, t, r.ns, r.name, time.Minute)
			}
			time.Sleep(10 * time.Second)
			for _, r := range relays {
				s.waitReady(ctx, t, r.ns, r.name, time.Minute)
			}
			before := s.relayState(ctx, t, relays)
			mintedBefore, writesBefore := keys(), s.writes.total()
			watch := s.watchRelays(ctx, relays)
			defer watch.stop()
			started := time.Now()
			if step.version == version {
				s.pushPackages(t, s.release, version)
			}
			s.readme(t, step.block, false)
			s.requirePackages(ctx, t, step.version)
			// The new provider has reconciled every RelayConfig and the
			// function composed each PeerRelay anew well within this.
			time.Sleep(45 * time.Second)
			seen := watch.stop()
			after := s.relayState(ctx, t, relays)
			t.Logf("%s to %s: %v; writes to the relays' objects: %d; longest PeerRelayReady dip %v; most replicas down at once %v; dips %v; reads %v",
				step.name, step.version, time.Since(started).Round(time.Second), s.writes.total()-writesBefore, seen.longestDip, seen.mostDown, seen.dips, seen.reads)
			// v0.1.0 and v0.2.0 compose the same relay pods (CHANGELOG.md):
			// no pod restarts, none is ever not ready.
			if restarted, changed := checkKept(t, before, after); len(restarted)+len(changed) > 0 {
				t.Errorf("pods restarted %v, templates changed %v: want none between %s and %s", restarted, changed, previousVersion, version)
			}
			if n := keys() - mintedBefore; n != 0 {
				t.Errorf("%d keys minted: %v", n, keyCalls(api, mintedBefore))
			}
			// Crossplane switches to a Function's new revision before its
			// runtime serves: a PeerRelay composed meanwhile gets a fatal
			// error, on which Crossplane marks the function's conditions
			// Unknown (FatalError) until the function answers again. The
			// function never says False, and the dip is bounded.
			for _, r := range relays {
				if seen.reads[r] < 40 {
					t.Errorf("%s: read %d times during the %s", r, seen.reads[r], step.name)
				}
				if d := seen.longestDip[r]; d > time.Minute {
					t.Errorf("%s: PeerRelayReady not True for %v", r, d)
				}
				for _, why := range seen.dips[r] {
					if _, w, _ := strings.Cut(why, " "); !strings.HasPrefix(w, "Unknown FatalError") {
						t.Errorf("%s: PeerRelayReady %s", r, why)
					}
				}
				if n := seen.mostDown[r]; n > 0 {
					t.Errorf("%s: %d replicas down at once", r, n)
				}
			}
			if u := s.writes.unresponsiveXRs(); len(u) > 0 {
				t.Errorf("watch circuit breakers opened: %v", u)
			}
			scale(t, step.replicasAfter, step.keysAfter)
		})
		if !ok {
			return
		}
	}
}

// keyCalls says when each key after the first skip was asked for, and for
// which replica (the provider names it in the key's description).
func keyCalls(api *tailnettest.FakeAPI, skip int) []string {
	var out []string
	for _, c := range callsTo(api, "POST", "/api/v2/tailnet/-/keys")[skip:] {
		out = append(out, fmt.Sprintf("%s %v", c.At.Format("15:04:05.000"), c.Body["description"]))
	}
	return out
}

// requirePackages waits until the function, the provider and the
// configuration each run version as their healthy current revision.
func (s *system) requirePackages(ctx context.Context, t testing.TB, version string) {
	t.Helper()
	for _, p := range []struct{ kind, name string }{
		{"Function", "peerrelay-function-peerrelay"},
		{"Provider", "peerrelay-provider-peerrelay"},
		{"Configuration", "peerrelay-configuration-peerrelay"},
	} {
		harness.Eventually(t, 5*time.Minute, fmt.Sprintf("%s %s at %s, healthy", p.kind, p.name, version), func(context.Context) error {
			pkg, err := s.Get(ctx, "pkg.crossplane.io/v1", p.kind, "", p.name)
			if err != nil {
				return err
			}
			current, _, _ := unstructured.NestedString(pkg.Object, "status", "currentRevision")
			rev, err := s.Get(ctx, "pkg.crossplane.io/v1", p.kind+"Revision", "", current)
			if err != nil {
				return err
			}
			if img, _, _ := unstructured.NestedString(rev.Object, "spec", "image"); !strings.HasSuffix(img, ":"+version) {
				return fmt.Errorf("current revision %s runs %s", current, img)
			}
			if st, msg := condition(rev, "RevisionHealthy"); st != "True" {
				return fmt.Errorf("revision %s: RevisionHealthy %s: %s", current, st, msg)
			}
			if st, msg := condition(pkg, "Healthy"); st != "True" {
				return fmt.Errorf("%s: Healthy %s: %s", p.name, st, msg)
			}
			return nil
		})
	}
}

// mintingTailnet makes a ClusterProviderConfig name whose keys the provider
// mints through the Tailscale API's contract fake.
func (s *system) mintingTailnet(t testing.TB, name string) *tailnettest.FakeAPI {
	t.Helper()
	api, tailscale := s.fakeTailscaleAPI(t, name+"-oauth")
	cpc := map[string]any{"apiVersion": relayAPI, "kind": "ClusterProviderConfig", "metadata": map[string]any{"name": name}, "spec": map[string]any{"tailscale": tailscale}}
	b, err := json.Marshal(cpc)
	if err != nil {
		t.Fatal(err)
	}
	s.applyJSON(t, string(b))
	return api
}

// fakeTailscaleAPI starts the Tailscale API's contract fake where the
// provider's pods reach it (the node's services address), with the OAuth
// client it accepts in Secret secret of Crossplane's namespace; it returns
// the fake and the spec.tailscale a ProviderConfig names it by.
func (s *system) fakeTailscaleAPI(t testing.TB, secret string) (*tailnettest.FakeAPI, map[string]any) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(s.node.ServicesIP().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	api := tailnettest.StartFakeAPIOn(t, l, nil)
	s.applyJSON(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":%q,"namespace":%q},"stringData":{"client_id":"client-id","client_secret":"client-secret"}}`, secret, xpharness.CrossplaneNamespace))
	return api, map[string]any{"baseURL": api.URL, "oauthSecretRef": map[string]any{"name": secret, "namespace": xpharness.CrossplaneNamespace}}
}

// relayState is what an upgrade must keep of the live relays.
type relayState struct {
	// pods by namespace/name: UID, and the template hash of the
	// StatefulSet that runs it.
	pods, templates map[string]string
	// nodeKeys by pod, devices (device_id) by state Secret.
	nodeKeys map[string]key.NodePublic
	devices  map[string]string
	// objects are the RelayConfigs and Secrets of the relays' namespaces,
	// kind/namespace/name → UID.
	objects map[string]string
}

func (s *system) relayState(ctx context.Context, t *testing.T, relays []liveRelay) relayState {
	t.Helper()
	st := relayState{pods: map[string]string{}, templates: map[string]string{}, nodeKeys: map[string]key.NodePublic{}, devices: map[string]string{}, objects: map[string]string{}}
	for _, r := range relays {
		pr, err := s.Get(ctx, v2API, "PeerRelay", r.ns, r.name)
		if err != nil {
			t.Fatal(err)
		}
		replicas, _, _ := unstructured.NestedInt64(pr.Object, "spec", "replicas")
		for i := range int(replicas) {
			pod := fmt.Sprintf("%s-%d-0", r.name, i)
			p := &corev1.Pod{}
			if err := s.Admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: pod}, p); err != nil {
				t.Fatal(err)
			}
			st.pods[r.ns+"/"+pod] = string(p.UID)
			sts, err := s.Get(ctx, "apps/v1", "StatefulSet", r.ns, fmt.Sprintf("%s-%d", r.name, i))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, _, _ := unstructured.NestedMap(sts.Object, "spec", "template")
			b, _ := json.Marshal(tmpl)
			st.templates[r.ns+"/"+pod] = fmt.Sprintf("%x", sha256.Sum256(b))
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			status, err := s.localClient(t, r.ns, pod).StatusWithoutPeers(ctx)
			cancel()
			if err != nil || status.Self == nil {
				t.Fatalf("%s/%s: tailscaled status: %v", r.ns, pod, err)
			}
			st.nodeKeys[r.ns+"/"+pod] = status.Self.PublicKey
		}
		rcs, err := s.List(ctx, relayAPI, "RelayConfig", r.ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range rcs {
			st.objects["RelayConfig/"+r.ns+"/"+rc.GetName()] = string(rc.GetUID())
		}
		secrets := &corev1.SecretList{}
		if err := s.Admin.List(ctx, secrets, client.InNamespace(r.ns)); err != nil {
			t.Fatal(err)
		}
		for _, sec := range secrets.Items {
			st.objects["Secret/"+r.ns+"/"+sec.Name] = string(sec.UID)
			if id := string(sec.Data["device_id"]); id != "" {
				st.devices[r.ns+"/"+sec.Name] = id
			}
		}
	}
	return st
}

// checkKept: every device, node key, RelayConfig and Secret is the same; a
// pod is the same unless its template changed. It returns the pods
// restarted and those whose template changed.
func checkKept(t *testing.T, before, after relayState) (restarted, changed []string) {
	t.Helper()
	for _, c := range []struct {
		what          string
		before, after map[string]string
	}{{"device", before.devices, after.devices}, {"object", before.objects, after.objects}} {
		for k, v := range c.before {
			if c.after[k] != v {
				t.Errorf("%s %s: %q before, %q after", c.what, k, v, c.after[k])
			}
		}
	}
	for pod, k := range before.nodeKeys {
		if after.nodeKeys[pod] != k {
			t.Errorf("pod %s: node key %s before, %s after", pod, k.ShortString(), after.nodeKeys[pod].ShortString())
		}
	}
	for pod, uid := range before.pods {
		if before.templates[pod] != after.templates[pod] {
			changed = append(changed, pod)
		} else if after.pods[pod] != uid {
			t.Errorf("pod %s restarted with its template unchanged", pod)
		}
		if after.pods[pod] != uid {
			restarted = append(restarted, pod)
		}
	}
	slices.Sort(restarted)
	slices.Sort(changed)
	return restarted, changed
}

// relayWatch follows live PeerRelays during an upgrade: how long each was
// without PeerRelayReady=True at the longest, and the most of its replicas
// not ready at once.
type relayWatch struct {
	stop func() relaysSeen
}

type relaysSeen struct {
	longestDip map[liveRelay]time.Duration
	mostDown   map[liveRelay]int
	// dips says each way PeerRelayReady was not True, and when first.
	dips map[liveRelay][]string
	// reads counts the PeerRelay's successful reads.
	reads map[liveRelay]int
}

func (s *system) watchRelays(ctx context.Context, relays []liveRelay) relayWatch {
	ctx, cancel := context.WithCancel(ctx)
	seen := relaysSeen{longestDip: map[liveRelay]time.Duration{}, mostDown: map[liveRelay]int{}, dips: map[liveRelay][]string{}, reads: map[liveRelay]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Go(func() {
			var dipSince time.Time
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				ready, why, down, err := s.relayNow(ctx, r)
				now := time.Now()
				mu.Lock()
				if err == nil && !ready && !slices.ContainsFunc(seen.dips[r], func(d string) bool { return strings.HasSuffix(d, " "+why) }) {
					seen.dips[r] = append(seen.dips[r], now.Format("15:04:05.0")+" "+why)
				}
				switch {
				case err != nil:
				case !ready && dipSince.IsZero():
					dipSince = now
				case ready && !dipSince.IsZero():
					seen.longestDip[r] = max(seen.longestDip[r], now.Sub(dipSince))
					dipSince = time.Time{}
				}
				if err == nil {
					seen.mostDown[r] = max(seen.mostDown[r], down)
					seen.reads[r]++
				}
				if !dipSince.IsZero() {
					seen.longestDip[r] = max(seen.longestDip[r], now.Sub(dipSince))
				}
				mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	// stop may be called again (a deferred stop after the test's own).
	return relayWatch{stop: sync.OnceValue(func() relaysSeen {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return relaysSeen{longestDip: maps.Clone(seen.longestDip), mostDown: maps.Clone(seen.mostDown), dips: maps.Clone(seen.dips), reads: maps.Clone(seen.reads)}
	})}
}

// relayNow reads whether r says PeerRelayReady=True (and if not, its
// status and reason), and how many of its replicas' pods are missing or
// not ready.
func (s *system) relayNow(ctx context.Context, r liveRelay) (ready bool, why string, down int, err error) {
	pr, err := s.Get(ctx, v2API, "PeerRelay", r.ns, r.name)
	if err != nil {
		return false, "", 0, err
	}
	st, msg := condition(pr, v1alpha1.ConditionPeerRelayReady)
	replicas, _, _ := unstructured.NestedInt64(pr.Object, "spec", "replicas")
	for i := range int(replicas) {
		// A pod that is not there is down; a read that failed says nothing
		// (the API server is busy with the packages' new CRDs).
		p := &corev1.Pod{}
		err := s.Admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: fmt.Sprintf("%s-%d-0", r.name, i)}, p)
		if err != nil && !kerrors.IsNotFound(err) {
			return false, "", 0, err
		}
		if err != nil || p.DeletionTimestamp != nil || !podReady(p) {
			down++
		}
	}
	return st == "True", st + " " + msg, down, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
