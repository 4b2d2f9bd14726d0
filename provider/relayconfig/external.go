package relayconfig

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"

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

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
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

	// obs is what Observe found, for Create or Update to write (doc.go,
	// deviation 4).
	obs observation
}

// observation is what Observe found for Create or Update to write: the
// config and its inputs, and whether the state Secret is missing or a key
// must be minted first.
type observation struct {
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
	checked *deviceAnswer
}

// Observe is a script of the replica's observations, each in the file of
// its concept: the endpoints to advertise (endpoints.go), the device
// (device.go), its reachability and traffic (reachability.go, traffic.go),
// the key it logs in with (authkey.go), then the config they render to,
// compared with the config Secret. A failed lookup keeps the last good
// endpoints: the config is never rewritten with fewer addresses because
// of an error.
func (e *external) Observe(ctx context.Context, mg *v1alpha1.RelayConfig) (_ managed.ExternalObservation, err error) {
	defer func() { err = stable(err) }()
	found, err := e.observeEndpoints(ctx, mg)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	state, err := e.observeDevice(ctx, mg)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.checkReachability(mg, found.eps, found.viaKubeProxy)
	e.sampleTraffic(ctx, mg)
	authKey, mint, err := e.authKey(ctx, mg, state)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.obs.mintKey = mint
	if err := e.renderConfig(mg, found.eps, authKey); err != nil {
		return managed.ExternalObservation{}, err
	}
	return e.compare(ctx, mg, found)
}

// renderConfig renders the config the replica runs, and says in Ready
// whether it advertises an endpoint.
func (e *external) renderConfig(mg *v1alpha1.RelayConfig, eps []netip.AddrPort, authKey string) error {
	p := mg.Spec.ForProvider
	e.obs.relay = tsconfig.Relay{Hostname: p.Hostname, Port: uint16(p.Port), Endpoints: eps, AuthKey: authKey, ServerURL: e.controlURL}
	if err := e.render(mg); err != nil {
		return err
	}
	if len(eps) > 0 {
		mg.SetConditions(xpv2.Available())
	} else {
		mg.SetConditions(xpv2.Unavailable().WithMessage("no public endpoint yet: the relay runs but advertises none"))
	}
	return nil
}

// compare says whether the config Secret holds what Observe rendered, and
// what Update has to make first. A failed lookup or placement check comes
// back as an error only once the config is written: Synced=False with the
// reason, an event, and a retry with backoff.
func (e *external) compare(ctx context.Context, mg *v1alpha1.RelayConfig, found endpointsFound) (managed.ExternalObservation, error) {
	s := found.config
	if s != nil && !metav1.IsControlledBy(s, mg) {
		return managed.ExternalObservation{}, errForeignSecret(mg.Spec.ForProvider.ConfigSecretName, "spec.forProvider.configSecretName")
	}
	if s == nil || e.obs.stateMissing || e.obs.mintKey {
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
	if len(s.Data) != 1 || !bytes.Equal(s.Data[tsconfig.FileName], e.obs.rendered) {
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false}, nil
	}
	if found.resolveErr != nil {
		return managed.ExternalObservation{}, fmt.Errorf("cannot resolve endpoints (keeping the last good ones): %w", found.resolveErr)
	}
	if found.checkErr != nil {
		return managed.ExternalObservation{}, found.checkErr
	}
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
}

// render renders the observation's relay into its config and records
// its hash.
func (e *external) render(mg *v1alpha1.RelayConfig) error {
	b, hash, err := tsconfig.Render(e.obs.relay)
	if err != nil {
		return err
	}
	e.obs.rendered = b
	mg.Status.AtProvider.ConfigHash = hash
	return nil
}

// prepare makes what the config refers to before it is written: the state
// Secret when it is missing, a minted key when one is needed.
func (e *external) prepare(ctx context.Context, mg *v1alpha1.RelayConfig) error {
	if e.obs.stateMissing {
		if err := e.createStateSecret(ctx, mg); err != nil {
			return err
		}
	}
	if !e.obs.mintKey {
		return nil
	}
	if e.obs.staleDevice != "" && e.api != nil {
		if err := e.deleteDevice(ctx, mg, e.obs.staleDevice); err != nil {
			return err
		}
	}
	ref, err := e.mint(ctx, mg)
	if err != nil {
		return err
	}
	e.obs.relay.AuthKey, e.obs.mintKey = ref, false
	return e.render(mg)
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
		s.Data = map[string][]byte{tsconfig.FileName: e.obs.rendered}
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
	_, err := controllerutil.CreateOrUpdate(ctx, uncachedGets{Client: e.kube, read: e.read}, s, func() error {
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

// uncachedGets reads past the cache and writes through the client: the
// cache keeps a stripped copy of each Secret (secretcache.go), and an
// update of that copy would drop what it left out (other labels and
// annotations, finalizers, owner references).
type uncachedGets struct {
	client.Client
	read client.Reader
}

func (u uncachedGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return u.read.Get(ctx, key, obj, opts...)
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
