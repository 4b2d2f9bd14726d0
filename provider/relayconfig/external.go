package relayconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"tailscale.com/ipn"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/endpoint"
	"github.com/peerrelay/peerrelay/provider/placement"
	"github.com/peerrelay/peerrelay/provider/resolve"
	"github.com/peerrelay/peerrelay/provider/tailnet"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
)

// Labels on the config Secrets the provider writes; the manager caches only
// Secrets that carry them.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "provider-peerrelay"
	labelRelay     = "relay.peerrelay.io/relayconfig"
)

// external resolves and writes one RelayConfig's config Secret. A new one
// is made for every reconcile, so it may carry what Observe rendered to
// Create or Update (doc.go, deviation 4).
type external struct {
	kube       client.Client
	read       client.Reader
	resolver   *resolve.Resolver
	controlURL string
	api        tailnet.API        // nil without Tailscale API access
	placement  *placement.Checker // nil without AWS credentials
	record     event.Recorder
	// allowedTags are the tags minted keys may carry (the provider
	// config's spec.policy.tags); nil: any.
	allowedTags tagPolicy
	// probers are the provider's probers; reachability says how this
	// RelayConfig is probed, nil when its provider config does not.
	probers      *probers
	reachability *reachability
	// budgets bound the keys minted per namespace and provider config
	// (mintbudget.go); nil: none.
	budgets *mintBudgets
	// samplers read the replica's relay counters (traffic.go); nil in
	// tests that do not sample.
	samplers *samplers

	// What Observe found for Create or Update to write: the config and its
	// inputs, and whether the state Secret is missing or a key must be
	// minted first.
	relay        tsconfig.Relay
	rendered     []byte
	stateMissing bool
	mintKey      bool
	// staleDevice is the device that lost its login and asked for a new
	// key: Update removes it (once the tailnet says it is the replica's)
	// before minting, so the new login does not leave it behind.
	staleDevice string
	// checked is what the tailnet said of the recorded device in this
	// reconcile (device.go).
	checked *deviceCheck
}

// Observe resolves the endpoints and compares the config Secret with what
// they render to. A failed lookup keeps the last good endpoints: the config
// is never rewritten with fewer addresses because of an error.
func (e *external) Observe(ctx context.Context, mg *v1alpha1.RelayConfig) (_ managed.ExternalObservation, err error) {
	defer func() { err = stable(err) }()
	p := mg.Spec.ForProvider
	svc, err := e.service(ctx, mg)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	checkErr := e.checkPlacement(ctx, mg)
	start := time.Now()
	var res resolve.Result
	var resolveErr error
	if p.Node != nil {
		res, resolveErr = e.nodeEndpoints(ctx, mg, svc)
	} else {
		res, resolveErr = e.resolver.Resolve(ctx, svc, p)
	}
	observeResolve(start, resolveErr)
	current, err := e.configSecret(ctx, mg)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	last := kept(lastGood(mg, current), p)
	eps := res.Endpoints
	switch {
	case resolveErr != nil:
		eps = last
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonResolveFailed,
			fmt.Sprintf("%s; still advertising the last good endpoints %v", stableMessage(resolveErr), endpoint.Strings(last))))
	case len(eps) == 0 && len(last) > 0:
		// The ingress went away (the load balancer is being replaced, say):
		// keep advertising what was last known rather than nothing.
		eps = last
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonAwaitingAddress,
			"the Service has no load balancer address now; still advertising the last good endpoints"))
	case len(eps) == 0 && p.Node != nil:
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonAwaitingAddress,
			fmt.Sprintf("waiting for pod %s to run on a node with an address (and, for a NodePort, for the Service's node port)", p.Node.Pod)))
	case len(eps) == 0:
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonAwaitingAddress,
			"waiting for the Service's load balancer address"))
	default:
		eps = shrinkSlowly(mg, res, last)
		e.recordResolved(mg, res, eps)
	}
	// status.atProvider.endpoints is what the config advertises, the last
	// good list included: the config Secret is restored from it when it is
	// lost during an outage.
	if kept := endpoint.Strings(eps); !slices.Equal(mg.Status.AtProvider.Endpoints, kept) {
		mg.Status.AtProvider.Endpoints = kept
	}

	state, err := e.stateSecret(ctx, mg)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.stateMissing = state == nil && mg.Spec.ForProvider.StateSecretName != ""
	recordDevice(mg, state) // for Delete, even if the state goes later
	e.cleanupCondition(mg)
	e.checkReachability(mg, eps)
	e.sampleTraffic(ctx, mg)
	authKey, mint, err := e.authKey(ctx, mg, state)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.mintKey = mint
	e.relay = tsconfig.Relay{Hostname: p.Hostname, Port: uint16(p.Port), Endpoints: eps, AuthKey: authKey, ServerURL: e.controlURL}
	if err := e.render(mg); err != nil {
		return managed.ExternalObservation{}, err
	}
	if len(eps) > 0 {
		mg.SetConditions(xpv2.Available())
	} else {
		mg.SetConditions(xpv2.Unavailable().WithMessage("no public endpoint yet: the relay runs but advertises none"))
	}

	s := current
	if s != nil && !metav1.IsControlledBy(s, mg) {
		return managed.ExternalObservation{}, errForeignSecret(p.ConfigSecretName, "spec.forProvider.configSecretName")
	}
	if s == nil || e.stateMissing || e.mintKey {
		// A missing Secret is written by Update (doc.go, deviation 1),
		// as is a missing state Secret or a key to mint. Once the
		// RelayConfig is being deleted, the replica's device may still be
		// in the tailnet (its namespace's Secrets may have gone first).
		if meta.WasDeleted(mg) {
			left, err := e.deviceLeft(ctx, mg)
			return managed.ExternalObservation{ResourceExists: left}, err
		}
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false}, nil
	}
	upToDate := len(s.Data) == 1 && bytes.Equal(s.Data[tsconfig.FileName], e.rendered)
	if !upToDate {
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false}, nil
	}
	if resolveErr != nil {
		// Synced=False with the reason, an event, and a retry with backoff.
		return managed.ExternalObservation{}, fmt.Errorf("cannot resolve endpoints (keeping the last good ones): %w", resolveErr)
	}
	if checkErr != nil {
		return managed.ExternalObservation{}, checkErr // the same: retried with backoff
	}
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
}

// render renders e.relay into e.rendered and records its hash.
func (e *external) render(mg *v1alpha1.RelayConfig) error {
	b, hash, err := tsconfig.Render(e.relay)
	if err != nil {
		return err
	}
	e.rendered = b
	mg.Status.AtProvider.ConfigHash = hash
	return nil
}

// prepare makes what the config refers to before it is written: the state
// Secret when it is missing, a minted key when one is needed.
func (e *external) prepare(ctx context.Context, mg *v1alpha1.RelayConfig) error {
	if e.stateMissing {
		if err := e.createStateSecret(ctx, mg); err != nil {
			return err
		}
	}
	if !e.mintKey {
		return nil
	}
	if e.staleDevice != "" && e.api != nil {
		if err := e.deleteDevice(ctx, mg, e.staleDevice); err != nil {
			return err
		}
	}
	ref, err := e.mint(ctx, mg)
	if err != nil {
		return err
	}
	e.relay.AuthKey, e.mintKey = ref, false
	return e.render(mg)
}

// configSecret returns the config Secret, or nil when there is none.
func (e *external) configSecret(ctx context.Context, mg *v1alpha1.RelayConfig) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.Spec.ForProvider.ConfigSecretName}, s)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get config Secret %s: %w", mg.Spec.ForProvider.ConfigSecretName, err)
	}
	return s, nil
}

// lastGood is what the replica advertises now: the endpoints in its config
// Secret when it has one (the status may lag behind a write), else those
// recorded in status.
func lastGood(mg *v1alpha1.RelayConfig, s *corev1.Secret) []netip.AddrPort {
	if s != nil && metav1.IsControlledBy(s, mg) {
		var c ipn.ConfigVAlpha
		if json.Unmarshal(s.Data[tsconfig.FileName], &c) == nil && len(c.RelayServerStaticEndpoints) > 0 {
			return c.RelayServerStaticEndpoints
		}
	}
	eps, _ := endpoint.Parse("status.atProvider.endpoints", mg.Status.AtProvider.Endpoints)
	return eps
}

// kept is what a replica goes on advertising while its lookup fails or its
// load balancer has no address: the last good addresses on today's port
// (spec.forProvider.port may have changed since they were resolved), and
// today's static endpoints as they are.
func kept(last []netip.AddrPort, p v1alpha1.RelayConfigParameters) []netip.AddrPort {
	if len(last) == 0 {
		return nil
	}
	static, _ := endpoint.ParseStatic("spec.forProvider.staticEndpoints", p.StaticEndpoints)
	out := slices.Clone(static)
	for _, ep := range last {
		if !slices.ContainsFunc(static, func(s netip.AddrPort) bool { return s.Addr() == ep.Addr() }) {
			out = append(out, netip.AddrPortFrom(ep.Addr(), uint16(p.Port)))
		}
	}
	return endpoint.Normalize(out)
}

// shrinkGrace is how long addresses a hostname's answer leaves out stay
// advertised: an NLB's name answers one address per zone, and a resolver's
// partial answer would otherwise drop a zone, then add it back, each time
// rewriting the config. An address really gone is dropped at the first
// lookup after the grace.
const shrinkGrace = 2 * time.Minute

// shrinkSlowly returns what to advertise from a successful lookup: its
// endpoints, except while the answer for the same hostname lacks some of
// the last good ones, for up to shrinkGrace (status.atProvider.
// shrinkingSince records since when).
func shrinkSlowly(mg *v1alpha1.RelayConfig, res resolve.Result, last []netip.AddrPort) []netip.AddrPort {
	at := &mg.Status.AtProvider
	partial := res.Hostname != "" && res.Hostname == at.Hostname && len(res.Endpoints) < len(last) &&
		!slices.ContainsFunc(res.Endpoints, func(ep netip.AddrPort) bool { return !slices.Contains(last, ep) })
	switch {
	case !partial:
		at.ShrinkingSince = nil
	case at.ShrinkingSince == nil:
		now := metav1.Now()
		at.ShrinkingSince = &now
		return last
	case time.Since(at.ShrinkingSince.Time) < shrinkGrace:
		return last
	default:
		at.ShrinkingSince = nil
	}
	return res.Endpoints
}

// recordResolved records a successful lookup, and advertised, what comes of
// it, in status.
func (e *external) recordResolved(mg *v1alpha1.RelayConfig, res resolve.Result, advertised []netip.AddrPort) {
	eps := endpoint.Strings(advertised)
	at := &mg.Status.AtProvider
	if !slices.Equal(at.Endpoints, eps) || at.Source != res.Source || at.Hostname != res.Hostname {
		now := metav1.Now()
		at.Endpoints, at.Source, at.Hostname, at.LastResolved = eps, res.Source, res.Hostname, &now
	}
	msg := fmt.Sprintf("%d endpoints from %s", len(eps), res.Source)
	if res.Source == v1alpha1.SourceNodeInternalIP {
		msg += "; the pod's node has no ExternalIP, so its InternalIP is advertised: peers reach it only where that network is routed (a port forward to it, a VPN)"
	}
	if at.ShrinkingSince != nil {
		msg += fmt.Sprintf("; %s answers only %d of them now, the others stay advertised for %s in case the answer was partial", res.Hostname, len(res.Endpoints), shrinkGrace)
	}
	mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionTrue, v1alpha1.ReasonResolved, msg))
}

func (e *external) service(ctx context.Context, mg *v1alpha1.RelayConfig) (*corev1.Service, error) {
	ref := mg.Spec.ForProvider.ServiceRef
	if ref == nil {
		return nil, nil
	}
	svc := &corev1.Service{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, svc)
	if kerrors.IsNotFound(err) {
		return nil, nil // not created yet: pending, like no ingress
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get Service %s named by spec.forProvider.serviceRef: %w", ref.Name, err)
	}
	return svc, nil
}

// Create writes the config Secret. Observe reports a missing Secret as one
// to update (see doc.go), so the reconciler calls Update instead; Create
// stays for the interface and does the same.
func (e *external) Create(ctx context.Context, mg *v1alpha1.RelayConfig) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, stable(e.writeConfig(ctx, mg))
}

// Update writes the config Secret, or rewrites its data; containerboot
// reloads the file.
func (e *external) Update(ctx context.Context, mg *v1alpha1.RelayConfig) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, stable(e.writeConfig(ctx, mg))
}

// writeConfig makes what the config refers to, then creates or updates the
// config Secret, owned by the RelayConfig so it goes with it.
func (e *external) writeConfig(ctx context.Context, mg *v1alpha1.RelayConfig) error {
	if err := e.prepare(ctx, mg); err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mg.Spec.ForProvider.ConfigSecretName, Namespace: mg.GetNamespace()}}
	if err := e.writeSecret(ctx, mg, s, "spec.forProvider.configSecretName", func() {
		s.Data = map[string][]byte{tsconfig.FileName: e.rendered}
	}); err != nil {
		return fmt.Errorf("cannot write config Secret %s: %w", s.Name, err)
	}
	return nil
}

// writeSecret creates or updates s, a Secret of the RelayConfig's named by
// field, with fill's content. The provider's cache holds only its own
// Secrets: a create refused as AlreadyExists is either ours, not cached
// yet, or a Secret someone else wrote under that name, never taken over.
func (e *external) writeSecret(ctx context.Context, mg *v1alpha1.RelayConfig, s *corev1.Secret, field string, fill func()) error {
	_, err := controllerutil.CreateOrUpdate(ctx, e.kube, s, func() error {
		fill()
		return ownSecret(s, mg, field)
	})
	if kerrors.IsAlreadyExists(err) {
		if ferr := e.notForeign(ctx, mg, s.Name, field); ferr != nil {
			return ferr
		}
	}
	return err
}

// notForeign reads Secret name past the cache and says, when it exists and
// is not controlled by the RelayConfig, that it is someone else's.
func (e *external) notForeign(ctx context.Context, mg *v1alpha1.RelayConfig, name, field string) error {
	s := &corev1.Secret{}
	err := e.read.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: name}, s)
	switch {
	case kerrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("cannot get Secret %s: %w", name, err)
	case !metav1.IsControlledBy(s, mg):
		return errForeignSecret(name, field)
	}
	return nil
}

// errForeignSecret is the error for a Secret named by field that exists
// and is not the RelayConfig's: it is never used nor taken over.
func errForeignSecret(name, field string) error {
	return fmt.Errorf("the Secret %s exists and is not controlled by this RelayConfig: choose another %s or delete it", name, field)
}

// ownSecret labels s as the provider's, for the manager's cache, and makes
// the RelayConfig its controller, so it lives exactly as long as the
// replica. A Secret that already exists must be the RelayConfig's: one
// written by anyone else is never taken over (field names its name).
func ownSecret(s *corev1.Secret, mg *v1alpha1.RelayConfig, field string) error {
	if s.ResourceVersion != "" && !metav1.IsControlledBy(s, mg) {
		return errForeignSecret(s.Name, field)
	}
	meta.AddLabels(s, map[string]string{LabelManagedBy: ManagedBy, labelRelay: mg.GetName()})
	s.Type = corev1.SecretTypeOpaque
	meta.AddOwnerReference(s, meta.AsController(meta.TypedReferenceTo(mg, v1alpha1.RelayConfigGroupVersionKind)))
	return nil
}

// cleanupCondition says whether the replica's device leaves the tailnet
// with it: only Tailscale API access can remove it.
func (e *external) cleanupCondition(mg *v1alpha1.RelayConfig) {
	c := condition(v1alpha1.ConditionDeviceCleanup, corev1.ConditionTrue, v1alpha1.ReasonCleanupByAPI,
		"the device is removed from the tailnet when this replica goes")
	if e.api == nil {
		c.Status, c.Reason = corev1.ConditionFalse, v1alpha1.ReasonNoAPIAccess
		c.Message = "the provider config has no Tailscale API access (spec.tailscale): the device stays in the tailnet when this replica is removed; remove it in the admin console"
	}
	mg.SetConditions(c)
}

// Delete removes the replica's tailnet device (with Tailscale API access,
// once the tailnet confirms it is the replica's: device.go), then its
// config Secret if it is the RelayConfig's. An API error keeps the
// finalizer: the reconciler retries with backoff and says why in Synced.
func (e *external) Delete(ctx context.Context, mg *v1alpha1.RelayConfig) (_ managed.ExternalDelete, err error) {
	defer func() { err = stable(err) }()
	e.probersForget(mg)
	if e.samplers != nil {
		e.samplers.forget(mg.GetUID())
	}
	// Only the device recorded while the RelayConfig lived and was
	// admitted: the state Secret is the tenant's to write.
	if id := mg.Status.AtProvider.DeviceID; e.api != nil && id != "" {
		if err := e.deleteDevice(ctx, mg, id); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	// The replica's minted key, by the provider's record, mints nothing
	// more once it goes: a PeerRelay deleted and made again, or scaled up
	// and down, leaves no usable pre-authorised keys behind. A key already
	// used or expired cannot be revoked, and lapses by itself.
	if id := mg.Status.AtProvider.AuthKeyID; e.api != nil && id != "" {
		_ = e.api.RevokeKey(ctx, id)
	}
	s, err := e.configSecret(ctx, mg)
	if err != nil || s == nil || !metav1.IsControlledBy(s, mg) {
		return managed.ExternalDelete{}, err // someone else's Secret stays
	}
	if err := e.kube.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
		return managed.ExternalDelete{}, fmt.Errorf("cannot delete config Secret %s: %w", s.Name, err)
	}
	return managed.ExternalDelete{}, nil
}

// Disconnect has nothing to release.
func (e *external) Disconnect(context.Context) error { return nil }
