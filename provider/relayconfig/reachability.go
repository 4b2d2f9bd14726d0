package relayconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"tailscale.com/tailcfg"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/probe"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// probeTimeout bounds one probe of one advertised endpoint: the relay's
// allocation over DERP and the knock on the address.
const probeTimeout = 5 * time.Second

// joinRetry is how long a prober that could not join waits before the
// provider mints it another key: a failing join must not mint a key on
// every reconcile.
const joinRetry = time.Minute

// probers keeps one prober per provider config that turns the probe on,
// and when each RelayConfig was last probed. Only the leader reconciles,
// so only the leader's probers join the tailnet.
type probers struct {
	// join is probe.Join; tests may replace it.
	join func(context.Context, probe.Options) (*probe.Prober, error)
	now  func() time.Time

	// joining guards joined and closing. A join (a key minted, a login)
	// takes seconds under it, so it is not mu: the poll interval hook
	// asks mu after every reconcile of every RelayConfig.
	joining sync.Mutex
	// joined holds each provider config's prober by its name.
	joined  map[string]*joinedProber
	closing bool

	mu     sync.Mutex
	probed map[types.UID]probed
}

// joinedProber is a provider config's prober, or why it could not join.
type joinedProber struct {
	// config is what the prober joined with.
	config string
	p      *probe.Prober
	err    error
	failed time.Time
}

// probed is a RelayConfig's last probe: when, of which endpoints on which
// device, and how often it is due.
type probed struct {
	at        time.Time
	endpoints string
	device    string
	every     time.Duration
}

func newProbers() *probers {
	return &probers{join: probe.Join, now: time.Now, joined: map[string]*joinedProber{}, probed: map[types.UID]probed{}}
}

// prober returns the provider config's prober, joining it with a freshly
// minted ephemeral key the first time, when its config changed, or
// joinRetry after a failure.
func (ps *probers) prober(ctx context.Context, name, config string, o probe.Options, api tailnet.API, tags []string) (*probe.Prober, error) {
	ps.joining.Lock()
	defer ps.joining.Unlock()
	if ps.closing {
		return nil, errors.New("the provider is stopping")
	}
	if j := ps.joined[name]; j != nil {
		switch {
		case j.config != config:
			if j.p != nil {
				j.p.Close()
			}
		case j.p != nil || ps.now().Sub(j.failed) < joinRetry:
			return j.p, j.err
		}
	}
	j := &joinedProber{config: config}
	_, authKey, _, err := api.CreateAuthKey(ctx, tailnet.KeyRequest{Tags: tags, Description: "peer relay prober", Ephemeral: true})
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		o.AuthKey = authKey
		j.p, err = ps.join(ctx, o)
		cancel()
	}
	if err != nil {
		j.err, j.failed = fmt.Errorf("the prober cannot join the tailnet: %s", stableMessage(err)), ps.now()
	}
	ps.joined[name] = j
	return j.p, j.err
}

// due says whether a RelayConfig is to be probed now: its interval has
// passed, or what it advertises or its device changed since.
func (ps *probers) due(uid types.UID, now probed) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	last, ok := ps.probed[uid]
	return !ok || last.endpoints != now.endpoints || last.device != now.device || now.at.Sub(last.at) >= last.every
}

func (ps *probers) record(uid types.UID, p probed) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.probed[uid] = p
	// A RelayConfig that never reached Delete is not kept for ever.
	maps.DeleteFunc(ps.probed, func(_ types.UID, q probed) bool { return p.at.Sub(q.at) > staleAfter*q.every })
}

// forget drops a RelayConfig that is gone or no longer probed.
func (ps *probers) forget(uid types.UID) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.probed, uid)
}

// pollInterval polls a probed RelayConfig as often as it is probed
// (managed.PollIntervalHook): a relay that stops answering is seen within
// one interval, not at the next 10-minute poll.
func (ps *probers) pollInterval(uid types.UID, poll time.Duration) time.Duration {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p, ok := ps.probed[uid]; ok && p.every < poll {
		return p.every
	}
	return poll
}

// Close logs every prober out; called when the provider stops.
func (ps *probers) Close() {
	ps.joining.Lock()
	ps.closing = true
	joined := ps.joined
	ps.joined = map[string]*joinedProber{}
	ps.joining.Unlock()
	for _, j := range joined {
		if j.p != nil {
			j.p.Close()
		}
	}
}

// reachability is what external needs to probe: the provider config's
// prober, and how often.
type reachability struct {
	// prober returns the provider config's prober.
	prober func(context.Context) (*probe.Prober, error)
	every  time.Duration
}

// checkReachability probes the replica's advertised endpoints when due and
// sets its Reachable condition; between probes the condition stays as it
// is, so a relay at rest costs no status write.
func (e *external) checkReachability(ctx context.Context, mg *v1alpha1.RelayConfig, eps []netip.AddrPort) {
	r := e.reachability
	if r == nil {
		if removeCondition(mg, v1alpha1.ConditionReachable) {
			e.probersForget(mg)
		}
		return
	}
	device := mg.Status.AtProvider.DeviceID
	ps := e.probers
	now := probed{at: ps.now(), endpoints: strings.Join(mg.Status.AtProvider.Endpoints, ","), device: device, every: r.every}
	if device == "" || len(eps) == 0 {
		mg.SetConditions(condition(v1alpha1.ConditionReachable, corev1.ConditionUnknown, v1alpha1.ReasonProbePending,
			"waiting for the replica's device and an advertised endpoint to probe"))
		ps.record(mg.GetUID(), probed{at: now.at, every: r.every})
		return
	}
	if !ps.due(mg.GetUID(), now) {
		return
	}
	ps.record(mg.GetUID(), now)
	c := e.probe(ctx, mg, device, eps)
	observeProbe(mg, c)
	mg.SetConditions(c)
}

// probe knocks on every advertised endpoint at once and says what answered.
func (e *external) probe(ctx context.Context, mg *v1alpha1.RelayConfig, device string, eps []netip.AddrPort) xpv2.Condition {
	failed := func(msg string) xpv2.Condition {
		return condition(v1alpha1.ConditionReachable, corev1.ConditionUnknown, v1alpha1.ReasonProbeFailed, msg)
	}
	p, err := e.reachability.prober(ctx)
	if err != nil {
		return failed(err.Error())
	}
	relay, ok := p.Peer(tailcfg.StableNodeID(device))
	if !ok {
		return failed(fmt.Sprintf("device %s is not in the prober's netmap: it is not logged in, or the tailnet policy does not let the prober's tags see it", device))
	}
	// The device ID comes from the replica's state Secret, which its
	// namespace may write: probe only a device whose tags the provider
	// config allows (an untagged one is not, when it names tags), so a
	// tenant cannot aim the prober at another's device.
	if tags := relay.Tags().AsSlice(); !e.allowedTags.relayDevice(tags) {
		return failed(fmt.Sprintf("device %s carries tags %v, not tags this provider config's spec.policy.tags allow; it is not probed", device, tags))
	}
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { errs[i] = p.Probe(ctx, relay, ep, probeTimeout) })
	}
	wg.Wait()
	var answered, silent []string
	for i, err := range errs {
		switch {
		case err == nil:
			answered = append(answered, eps[i].String())
		case errors.Is(err, probe.ErrNoAnswer):
			silent = append(silent, eps[i].String())
		default:
			// The relay allocated nothing: it says nothing of the address.
			return failed(fmt.Sprintf("device %s: %v", device, err))
		}
	}
	switch {
	case len(silent) == 0:
		return condition(v1alpha1.ConditionReachable, corev1.ConditionTrue, v1alpha1.ReasonAnswered,
			fmt.Sprintf("every advertised endpoint answered the probe: %s", strings.Join(answered, ", ")))
	case len(answered) > 0:
		return condition(v1alpha1.ConditionReachable, corev1.ConditionTrue, v1alpha1.ReasonPartlyAnswered,
			fmt.Sprintf("%s answered the probe; no answer from %s", strings.Join(answered, ", "), strings.Join(silent, ", ")))
	default:
		return condition(v1alpha1.ConditionReachable, corev1.ConditionFalse, v1alpha1.ReasonNoAnswer,
			fmt.Sprintf("no advertised endpoint answered the probe within %s: %s; the relay runs, so look at what lies between (load balancer, security groups, firewall, the address's zone)", probeTimeout, strings.Join(silent, ", ")))
	}
}

func (e *external) probersForget(mg *v1alpha1.RelayConfig) {
	if e.probers != nil {
		e.probers.forget(mg.GetUID())
	}
	forgetProbes(mg.GetNamespace(), mg.GetName())
}

// removeCondition drops a condition of typ; it says whether there was one.
func removeCondition(mg *v1alpha1.RelayConfig, typ xpv2.ConditionType) bool {
	before := len(mg.Status.Conditions)
	mg.Status.Conditions = slices.DeleteFunc(mg.Status.Conditions, func(c xpv2.Condition) bool { return c.Type == typ })
	return len(mg.Status.Conditions) != before
}
