package relayconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/probe"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// joinRetry is how long a prober that could not join waits before the
// provider mints it another key: a failing join must not mint a key on
// every reconcile.
const joinRetry = time.Minute

// reprobeAfter bounds how soon a change (a new endpoint, a new device ID
// in the state Secret, which the tenant may write) probes a RelayConfig
// again: a tenant rewriting its state Secret cannot keep a worker busy.
const reprobeAfter = 15 * time.Second

// Probers are tailnet devices: a provider keeps at most maxProbers, and
// logs out one no RelayConfig asked for in proberIdle (its provider config
// gone, or its probe turned off).
const (
	maxProbers           = 16
	maxNamespacedProbers = 8
	proberIdle           = 30 * time.Minute
)

// probers keeps one prober per provider config (and credentials) that
// turns the probe on, the probe queue and its results. Only the leader
// reconciles and runs the workers, so only its probers join the tailnet.
type probers struct {
	// join is probe.Join; tests may replace it.
	join func(context.Context, probe.Options) (*probe.Prober, error)
	now  func() time.Time

	// joining guards joined and closing, briefly: a join (a key minted, a
	// login) takes seconds under the prober's own lock, not this one.
	joining sync.Mutex
	joined  map[string]*joinedProber
	closing bool

	queue *probeQueue
	// done asks the controller to reconcile a RelayConfig whose probe
	// finished (a channel source in Setup).
	done chan event.GenericEvent

	mu sync.Mutex
	// sched is when each RelayConfig was last probed.
	sched   *schedule
	results map[types.UID]probeResult
}

// joinedProber is a provider config's prober, or why it could not join.
type joinedProber struct {
	// config is what the prober joined with; namespace is its namespaced
	// ProviderConfig's ("" for a ClusterProviderConfig).
	config    string
	namespace string
	used      time.Time
	// mu is held through a join: one join per provider config at a time,
	// and none of the others waits on it.
	mu     sync.Mutex
	p      *probe.Prober
	err    error
	failed time.Time
}

// probeResult is a finished probe's condition, for what it probed (key:
// the endpoints and the device).
type probeResult struct {
	key  string
	cond xpv2.Condition
}

func newProbers() *probers {
	ps := &probers{join: probe.Join, now: time.Now, joined: map[string]*joinedProber{},
		queue: newProbeQueue(), done: make(chan event.GenericEvent, 1024), results: map[types.UID]probeResult{}}
	ps.sched = newSchedule(func() time.Time { return ps.now() }) // tests set ps.now
	return ps
}

// prober returns the prober under key, joining it with a freshly minted
// ephemeral key the first time, when its config changed, or joinRetry
// after a failure.
func (ps *probers) prober(ctx context.Context, key, namespace, config string, o probe.Options, api tailnet.API, tags []string) (*probe.Prober, error) {
	j, err := ps.entry(key, config, namespace)
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !ps.current(key, j) {
		// Replaced (its config changed) or logged out while this probe
		// waited: a prober joined now would be in no map, never closed.
		return nil, errors.New("the prober was replaced; the next probe uses the new one")
	}
	if j.p != nil || (j.err != nil && ps.now().Sub(j.failed) < joinRetry) {
		return j.p, j.err
	}
	_, authKey, _, err := api.CreateAuthKey(ctx, tailnet.KeyRequest{Tags: tags, Description: "peer relay prober", Ephemeral: true})
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		o.AuthKey = authKey
		j.p, err = ps.join(ctx, o)
		cancel()
	}
	j.err = nil
	if err != nil {
		j.err, j.failed = fmt.Errorf("the prober cannot join the tailnet: %s", stableMessage(err)), ps.now()
	}
	return j.p, j.err
}

// entry returns the prober entry under key for config, a new one when
// there is none or its config changed, within the bounds (room); probers
// idle for proberIdle are logged out first. namespace is a namespaced
// ProviderConfig's, "" for a ClusterProviderConfig's.
func (ps *probers) entry(key, config, namespace string) (*joinedProber, error) {
	ps.joining.Lock()
	defer ps.joining.Unlock()
	if ps.closing {
		return nil, errors.New("the provider is stopping")
	}
	now := ps.now()
	for k, j := range ps.joined {
		if now.Sub(j.used) > proberIdle || (k == key && j.config != config) {
			delete(ps.joined, k)
			go j.close()
		}
	}
	j := ps.joined[key]
	if j == nil {
		if err := ps.room(key, namespace); err != nil {
			return nil, err
		}
		j = &joinedProber{config: config, namespace: namespace}
		ps.joined[key] = j
	}
	j.used = now
	return j, nil
}

// current says whether j is still the prober under key.
func (ps *probers) current(key string, j *joinedProber) bool {
	ps.joining.Lock()
	defer ps.joining.Unlock()
	return ps.joined[key] == j
}

// room says whether a new prober may join under key: at most maxProbers
// for ClusterProviderConfigs, and apart from them, so that no tenant can
// take their slots, at most maxNamespacedProbers for namespaced
// ProviderConfigs, one per namespace. Called under joining.
func (ps *probers) room(key, namespace string) error {
	cluster, namespaced := 0, 0
	for k, j := range ps.joined {
		switch j.namespace {
		case "":
			cluster++
		case namespace:
			return fmt.Errorf("namespace %s runs a prober already, for %s: one namespaced ProviderConfig per namespace may probe", namespace, strings.Fields(k)[0])
		default:
			namespaced++
		}
	}
	switch {
	case namespace == "" && cluster >= maxProbers:
		return fmt.Errorf("the provider runs %d probers for ClusterProviderConfigs, its bound; this one's probe waits until one of them is idle for %s", maxProbers, proberIdle)
	case namespace != "" && namespaced >= maxNamespacedProbers:
		return fmt.Errorf("the provider runs %d probers for namespaced ProviderConfigs, its bound; this one's probe waits until one of them is idle for %s", maxNamespacedProbers, proberIdle)
	}
	return nil
}

// close logs the prober out, once any join under way has ended.
func (j *joinedProber) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.p != nil {
		j.p.Close()
		j.p = nil
	}
}

// result is the condition of the RelayConfig's last finished probe, when
// it probed what the replica advertises now (key).
func (ps *probers) result(uid types.UID, key string) (xpv2.Condition, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	r, ok := ps.results[uid]
	if !ok || r.key != key {
		return xpv2.Condition{}, false
	}
	return r.cond, true
}

// forget drops a RelayConfig that is gone or no longer probed.
func (ps *probers) forget(uid types.UID) {
	ps.sched.forget(uid)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.results, uid)
}

// pollInterval polls a probed RelayConfig as often as it is probed, or
// after reprobeAfter when a change waits: a relay that stops answering is
// seen within one interval, not at the next 10-minute poll.
func (ps *probers) pollInterval(uid types.UID, poll time.Duration) time.Duration {
	return ps.sched.pollInterval(uid, poll, reprobeAfter)
}

// Start runs the probe workers until ctx ends, then logs every prober
// out (manager.Runnable: on the leader only).
func (ps *probers) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range probeWorkers {
		wg.Go(func() { ps.work(ctx) })
	}
	wg.Wait()
	ps.Close()
	return nil
}

// work runs queued probes, records each result and asks for a reconcile
// of its RelayConfig, which reads it.
func (ps *probers) work(ctx context.Context) {
	for {
		j, ok := ps.queue.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-ps.queue.wake:
				continue
			}
		}
		c := j.run(ctx)
		ps.mu.Lock()
		// A RelayConfig forgotten meanwhile (deleted, its probe turned
		// off, gone stale) keeps no result and no gauge.
		if ps.sched.has(j.uid) {
			ps.results[j.uid] = probeResult{key: j.key, cond: c}
			observeProbe(j.rc, c)
		}
		maps.DeleteFunc(ps.results, func(uid types.UID, _ probeResult) bool { return !ps.sched.has(uid) })
		ps.mu.Unlock()
		ps.queue.finish(j)
		rc := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: j.rc.Namespace, Name: j.rc.Name}}
		select {
		case ps.done <- event.GenericEvent{Object: client.Object(rc)}:
		case <-ctx.Done():
			return
		}
	}
}

// Close logs every prober out; called when the provider stops.
func (ps *probers) Close() {
	ps.joining.Lock()
	ps.closing = true
	joined := ps.joined
	ps.joined = map[string]*joinedProber{}
	ps.joining.Unlock()
	for _, j := range joined {
		j.close()
	}
}
