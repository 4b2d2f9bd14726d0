package relayconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"tailscale.com/ipn"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/placement"
	"github.com/peerrelay/peerrelay/provider/probe"
	"github.com/peerrelay/peerrelay/provider/resolve"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// connector reads the RelayConfig's provider config and builds a resolver
// from it.
type connector struct {
	kube  client.Client // cached: Services, RelayConfigs, our config Secrets
	read  client.Reader // uncached: provider configs' credential Secrets, auth keys
	usage *resource.ProviderConfigUsageTracker
	// newAPI builds the Tailscale API client; nil means tailnet.New.
	newAPI func(baseURL, tailnet, id, secret string) (tailnet.API, error)
	// record records events on the RelayConfig; nil records none.
	record event.Recorder
	// apis and aws are the API clients, kept across reconciles.
	apis clientCache[tailnet.API]
	aws  clientCache[awsClients]
	// probers are the reachability probers (reachability.go); nil: no
	// probe runs.
	probers *probers
	// samplers read replicas' relay counters (traffic.go); nil: none is
	// sampled.
	samplers *samplers
	// budgets bound minted keys (mintbudget.go); nil: none.
	budgets *mintBudgets
	// namespacedOverrides lets a namespaced ProviderConfig use the
	// provider's own AWS identity and other API endpoints
	// (FeatureNamespacedOverrides).
	namespacedOverrides bool
}

// FeatureNamespacedOverrides lets a namespaced ProviderConfig, which a
// tenant may write, use the provider pod's own AWS identity
// (InjectedIdentity) and point spec.aws.endpoint and spec.tailscale.baseURL
// elsewhere. Off by default: requests signed with the provider's identity
// would go wherever the tenant says.
const FeatureNamespacedOverrides feature.Flag = "EnableNamespacedProviderConfigOverrides"

// Connect returns an external client for one reconcile. A RelayConfig
// deleted long ago whose provider config or credentials stay unusable gets
// one without them (givenUp).
func (c *connector) Connect(ctx context.Context, mg *v1alpha1.RelayConfig) (managed.TypedExternalClient[*v1alpha1.RelayConfig], error) {
	e, err := c.connect(ctx, mg)
	if err != nil {
		if gone := c.givenUp(mg, err); gone != nil {
			return gone, nil
		}
		return nil, stable(err)
	}
	return e, nil
}

func (c *connector) connect(ctx context.Context, mg *v1alpha1.RelayConfig) (*external, error) {
	spec, err := c.admitted(ctx, mg)
	if err != nil {
		// Kept with Synced=False by the status write that reports this
		// error: the function tells an unusable tailnet by this condition.
		mg.SetConditions(providerConfigCondition(err))
		return nil, err
	}
	mg.SetConditions(providerConfigCondition(nil))
	r := &resolve.Resolver{DNS: resolve.DNSResolver{}, Timeout: v1alpha1.DefaultResolveTimeout * time.Second, Namespace: mg.GetNamespace()}
	if spec.DNS != nil {
		r.DNS = resolve.DNSResolver{Server: spec.DNS.Server}
	}
	if spec.ResolveTimeout != nil && spec.ResolveTimeout.Duration > 0 {
		// The schema's bound, kept for objects written before it.
		r.Timeout = min(spec.ResolveTimeout.Duration, v1alpha1.MaxResolveTimeout*time.Second)
	}
	e := &external{kube: c.kube, read: c.read, resolver: r, controlURL: spec.ControlURL, record: c.recorder(), probers: c.probers, samplers: c.samplers, budgets: c.budgets}
	if spec.Policy != nil {
		e.allowedTags = spec.Policy.Tags
	}
	if spec.AWS != nil && spec.AWS.Source != "" && spec.AWS.Source != v1alpha1.AWSCredentialsNone {
		aws, ec2c, err := c.awsClients(ctx, spec.AWS, mg)
		if err != nil {
			return nil, err
		}
		r.AWS = aws
		// The RelayConfig's own namespace, which its tenant cannot choose:
		// what it names in AWS must be tagged for it.
		e.placement = &placement.Checker{EC2: ec2c, Namespace: mg.GetNamespace()}
	}
	if spec.Tailscale != nil {
		api, err := c.tailnetAPI(ctx, spec.Tailscale, mg)
		if err != nil {
			return nil, err
		}
		e.api = api
	}
	e.reachability = c.reachability(mg, spec, e.api)
	return e, nil
}

// reachability returns how a RelayConfig is probed under spec, or nil when
// spec.probe is unset.
func (c *connector) reachability(mg *v1alpha1.RelayConfig, spec *v1alpha1.ProviderConfigSpec, api tailnet.API) *reachability {
	if spec.Probe == nil || c.probers == nil || meta.WasDeleted(mg) {
		return nil
	}
	every := v1alpha1.DefaultProbeInterval
	if i := spec.Probe.Interval; i != nil {
		every = max(i.Duration, v1alpha1.MinProbeInterval)
	}
	r := &reachability{every: every}
	if api == nil {
		r.prober = func(context.Context) (*probe.Prober, error) {
			return nil, errors.New("spec.probe needs spec.tailscale in the provider config: the prober's key is minted through it")
		}
		return r
	}
	controlURL := spec.ControlURL
	if controlURL == "" {
		controlURL = ipn.DefaultControlURL
	}
	ref := mg.GetProviderConfigReference()
	// One prober per provider config and the credentials it mints with: a
	// ClusterProviderConfig whose OAuth Secret names no namespace reads
	// each RelayConfig's own, and a prober joined with one namespace's
	// credentials is not another's.
	name := providerConfigKey(ref.Kind, mg.GetNamespace(), ref.Name)
	if t := spec.Tailscale; t != nil {
		name += " " + credentialsNamespace(mg, t.OAuthSecretRef) + "/" + t.OAuthSecretRef.Name
	}
	// The prober is the provider config's, under what it joined with: a
	// change of any of these joins a new one.
	config := fmt.Sprintf("%s %v", controlURL, spec.Probe.Tags)
	if t := spec.Tailscale; t != nil {
		config += " " + t.BaseURL + " " + t.Tailnet + " " + t.OAuthSecretRef.Namespace + "/" + t.OAuthSecretRef.Name
	}
	proberNamespace := "" // a ClusterProviderConfig's prober: in no namespace's bound
	if ref.Kind == v1alpha1.ProviderConfigKind {
		proberNamespace = mg.GetNamespace()
	}
	r.prober = func(ctx context.Context) (*probe.Prober, error) {
		return c.probers.prober(ctx, name, proberNamespace, config, probe.Options{ControlURL: controlURL, Hostname: "peerrelay-prober"}, api, spec.Probe.Tags)
	}
	return r
}

func (c *connector) recorder() event.Recorder {
	if c.record == nil {
		return event.NewNopRecorder()
	}
	return c.record
}

// givenUp returns an external client without credentials for a RelayConfig
// that has been deleted for longer than credentialsGrace while they could
// not be read (err): it then goes, its config Secret with it, and a Warning
// event names the device left in the tailnet. Otherwise nil: Connect fails
// and is retried.
//
// A RelayConfig being deleted whose provider config did not admit it
// (errNotAdmitted) goes at once: waiting cannot make it admitted. So does
// one whose namespaced ProviderConfig or credentials are not found: they
// were in its own namespace, which is being deleted.
func (c *connector) givenUp(mg *v1alpha1.RelayConfig, err error) *external {
	if !meta.WasDeleted(mg) {
		return nil
	}
	var notAdmitted errNotAdmitted
	why := fmt.Sprintf("after %s the provider config or its credentials are still unusable", credentialsGrace)
	switch {
	case errors.As(err, &notAdmitted):
		why = "the provider config it names now is not the one that admitted it"
	case kerrors.IsNotFound(err) && mg.GetProviderConfigReference().Kind == v1alpha1.ProviderConfigKind:
		// A namespaced ProviderConfig, or a Secret it names, gone from the
		// RelayConfig's own namespace while the RelayConfig is deleted: the
		// namespace is going, and they will not come back.
		why = "its namespaced ProviderConfig or credentials are gone from the namespace"
	case !graceOver(mg):
		return nil
	}
	e := &external{kube: c.kube, read: c.read, resolver: &resolve.Resolver{}, record: c.recorder()}
	if id := mg.Status.AtProvider.DeviceID; id != "" {
		e.record.Event(mg, event.Warning(reasonDeviceNotDeleted, fmt.Errorf("device %s stays in the tailnet: remove it in the admin console; %s: %s", id, why, stableMessage(err))))
	}
	return e
}

// errPolicy is a provider config's policy refusing a RelayConfig.
type errPolicy struct{ error }

// errNotAdmitted is a RelayConfig being deleted whose provider config is
// not the one that admitted it while it was live.
type errNotAdmitted struct{ error }

// admitted returns the spec of the RelayConfig's provider config once it
// may be used. A live RelayConfig may use it when its policy admits the
// RelayConfig's namespace: the provider records which provider config
// admitted it (status.atProvider.admission) and only then tracks the
// usage, so a refused RelayConfig pins nothing. One being deleted may use
// only the provider config that admitted it, the same UID: a RelayConfig
// pointed at another team's provider config, refused while it lived, must
// not get that team's credentials at deletion. Nothing a tenant writes
// (the RelayConfig's spec, labels, a PeerRelay's spec.tailnet) is taken
// as the record.
func (c *connector) admitted(ctx context.Context, mg *v1alpha1.RelayConfig) (*v1alpha1.ProviderConfigSpec, error) {
	ref := mg.GetProviderConfigReference()
	if meta.WasDeleted(mg) && mg.Status.AtProvider.Admission == nil && ref != nil {
		// Composed with the finalizer, it holds it whether or not it was
		// ever admitted. Never admitted, it goes at once, its provider
		// config readable or not: the provider gave it nothing.
		return nil, notAdmitted(ref, nil)
	}
	spec, uid, err := c.providerConfig(ctx, mg)
	if err != nil {
		return nil, err
	}
	this := v1alpha1.Admission{Kind: ref.Kind, Name: ref.Name, UID: string(uid)}
	if meta.WasDeleted(mg) {
		if a := mg.Status.AtProvider.Admission; a == nil || *a != this {
			return nil, notAdmitted(ref, a)
		}
		return spec, nil
	}
	if err := namespacePolicy(spec, mg); err != nil {
		return nil, err
	}
	// A RelayConfig being deleted is not tracked: in a terminating
	// namespace the API server refuses to create its ProviderConfigUsage
	// again, and Connect failing would keep the finalizer for ever.
	if err := c.usage.Track(ctx, mg); err != nil {
		return nil, fmt.Errorf("cannot track provider config usage: %w", err)
	}
	mg.Status.AtProvider.Admission = &this
	return spec, nil
}

func notAdmitted(ref *xpv2.ProviderConfigReference, recorded *v1alpha1.Admission) error {
	return errNotAdmitted{fmt.Errorf("%s %s did not admit this RelayConfig while it lived (its admission is recorded as %s): it is not used to remove the replica's device", ref.Kind, ref.Name, admissionString(recorded))}
}

func admissionString(a *v1alpha1.Admission) string {
	if a == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s, UID %s", a.Kind, a.Name, a.UID)
}

// providerConfigCondition says whether the provider config could be read,
// and may be used.
func providerConfigCondition(err error) xpv2.Condition {
	var denied errPolicy
	var notAdmitted errNotAdmitted
	if errors.As(err, &denied) || errors.As(err, &notAdmitted) {
		return condition(v1alpha1.ConditionProviderConfig, corev1.ConditionFalse, v1alpha1.ReasonPolicyDenied, stableMessage(err))
	}
	if err != nil {
		return condition(v1alpha1.ConditionProviderConfig, corev1.ConditionFalse, v1alpha1.ReasonProviderConfigUnreadable, stableMessage(err))
	}
	return condition(v1alpha1.ConditionProviderConfig, corev1.ConditionTrue, v1alpha1.ReasonProviderConfigUsable, "")
}

// providerConfig returns the spec and UID of the ProviderConfig (in the
// RelayConfig's namespace) or ClusterProviderConfig it references.
func (c *connector) providerConfig(ctx context.Context, mg *v1alpha1.RelayConfig) (*v1alpha1.ProviderConfigSpec, types.UID, error) {
	ref := mg.GetProviderConfigReference()
	if ref == nil {
		return nil, "", errors.New("spec.providerConfigRef is not set")
	}
	switch ref.Kind {
	case v1alpha1.ProviderConfigKind:
		pc := &v1alpha1.ProviderConfig{}
		if err := c.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, pc); err != nil {
			return nil, "", fmt.Errorf("cannot get ProviderConfig %s/%s named by spec.providerConfigRef: %w", mg.GetNamespace(), ref.Name, err)
		}
		if err := c.namespacedPolicy(&pc.Spec); err != nil {
			return nil, "", fmt.Errorf("ProviderConfig %s/%s: %w", mg.GetNamespace(), ref.Name, err)
		}
		return &pc.Spec, pc.UID, nil
	case v1alpha1.ClusterProviderConfigKind:
		pc := &v1alpha1.ClusterProviderConfig{}
		if err := c.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, pc); err != nil {
			return nil, "", fmt.Errorf("cannot get ClusterProviderConfig %s named by spec.providerConfigRef: %w", ref.Name, err)
		}
		return &pc.Spec, pc.UID, nil
	}
	return nil, "", fmt.Errorf("spec.providerConfigRef.kind %q: want ProviderConfig or ClusterProviderConfig", ref.Kind)
}

// namespacedPolicy refuses what a namespaced ProviderConfig may not do
// unless the platform allows it (FeatureNamespacedOverrides).
func (c *connector) namespacedPolicy(spec *v1alpha1.ProviderConfigSpec) error {
	if c.namespacedOverrides {
		return nil
	}
	const how = "a namespaced ProviderConfig may not (use a ClusterProviderConfig, or start the provider with --enable-namespaced-provider-config-overrides)"
	switch {
	case spec.AWS != nil && spec.AWS.Source == v1alpha1.AWSCredentialsInjectedIdentity:
		return fmt.Errorf("spec.aws.source InjectedIdentity uses the provider's own AWS identity, which %s", how)
	case spec.AWS != nil && spec.AWS.Endpoint != "":
		return fmt.Errorf("spec.aws.endpoint sends AWS requests elsewhere, which %s", how)
	case spec.Tailscale != nil && spec.Tailscale.BaseURL != "":
		return fmt.Errorf("spec.tailscale.baseURL sends Tailscale API requests elsewhere, which %s", how)
	case spec.Probe != nil && spec.ControlURL != "":
		return fmt.Errorf("spec.probe with spec.controlURL has the provider's prober log in to another control server, which %s", how)
	case spec.DNS != nil && spec.DNS.Server != "":
		return fmt.Errorf("spec.dns.server sends the provider's DNS queries, from crossplane-system, to a server of its choosing, which %s", how)
	}
	return nil
}
