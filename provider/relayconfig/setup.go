package relayconfig

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// serviceIndex indexes RelayConfigs by the Service they name, so a Service
// event reaches its RelayConfig at once instead of at the next poll.
const serviceIndex = "spec.forProvider.serviceRef.name"

// providerConfigIndex indexes RelayConfigs by the provider config they
// use, so a change to one (turning the probe on, new credentials) reaches
// its RelayConfigs at once instead of at their next poll.
const providerConfigIndex = "spec.providerConfigRef"

// Setup adds the RelayConfig controller to the manager.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	name := managed.ControllerName(v1alpha1.RelayConfigGroupVersionKind.GroupKind().String())
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.RelayConfig{}, serviceIndex, serviceRefName); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.RelayConfig{}, providerConfigIndex, providerConfigRef); err != nil {
		return err
	}
	record := event.NewAPIRecorder(mgr.GetEventRecorderFor(name)) //nolint:staticcheck // crossplane-runtime v2.4.0 records through the old events API
	c := &connector{
		kube:     mgr.GetClient(),
		read:     mgr.GetAPIReader(),
		usage:    resource.NewProviderConfigUsageTracker(mgr.GetClient(), &v1alpha1.ProviderConfigUsage{}),
		record:   record,
		probers:  newProbers(),
		samplers: newSamplers(),
		budgets:  newMintBudgets(),
		// Features is nil in some callers' options.
		namespacedOverrides: o.Features != nil && o.Features.Enabled(FeatureNamespacedOverrides),
	}
	opts := []managed.ReconcilerOption{
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithRecorder(record),
		managed.WithPollInterval(o.PollInterval),
		managed.WithPollIntervalHook(func(mg resource.Managed, poll time.Duration) time.Duration {
			return nodePollInterval(mg, c.samplers.pollInterval(mg.GetUID(), c.probers.pollInterval(mg.GetUID(), poll)))
		}),
	}
	// The probe workers run on the leader; the probers are ephemeral
	// devices, logged out when the provider stops (or loses the lease)
	// rather than left to expire.
	if err := mgr.Add(c.probers); err != nil {
		return err
	}
	if m := o.MetricOptions; m != nil {
		opts = append(opts, managed.WithMetricRecorder(m.MRMetrics))
		if err := mgr.Add(statemetrics.NewMRStateRecorder(mgr.GetClient(), o.Logger, m.MRStateMetrics, &v1alpha1.RelayConfigList{}, m.PollStateMetricInterval)); err != nil {
			return err
		}
	}
	r := newReconciler(mgr, c, opts...)
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		// Not its own status writes: a failure's condition message, whatever
		// its words (a request ID, a timestamp), would wake the RelayConfig
		// at once and the backoff would never apply. Deletion bumps the
		// generation; annotations carry Crossplane's pause and create state.
		For(&v1alpha1.RelayConfig{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// The config and state Secrets: a device ID appearing in the state
		// Secret is recorded at once.
		Owns(&corev1.Secret{}).
		// A finished probe: Observe reads its result.
		WatchesRawSource(source.Channel(c.probers.done, &handler.EnqueueRequestForObject{})).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(relayConfigsFor(mgr.GetClient(), o.Logger))).
		// Spec changes only: Crossplane writes a provider config's status
		// (its users) whenever a RelayConfig starts or stops using it.
		Watches(&v1alpha1.ClusterProviderConfig{}, handler.EnqueueRequestsFromMapFunc(relayConfigsUsing(mgr.GetClient(), o.Logger)), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ProviderConfig{}, handler.EnqueueRequestsFromMapFunc(relayConfigsUsing(mgr.GetClient(), o.Logger)), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(newFairReconciler(newBackoff(r, o.Logger.WithValues("controller", name)), o.GlobalRateLimiter))
}

// newReconciler is the managed reconciler with the options that shape
// what it writes (doc.go, deviations 2, 3 and 6), shared with the test that
// counts the writes; opts add the rest.
func newReconciler(mgr manager.Manager, c *connector, opts ...managed.ReconcilerOption) *managed.Reconciler {
	return managed.NewReconciler(newQuietStatusManager(mgr), resource.ManagedKind(v1alpha1.RelayConfigGroupVersionKind), append([]managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.RelayConfig](c),
		managed.WithManagementPolicies(),
		managed.WithInitializers(), // no external-name initializer
		managed.WithFinalizer(statusKeepingFinalizer{resource.NewAPIFinalizer(mgr.GetClient(), managed.FinalizerName)}),
	}, opts...)...)
}

// serviceRefName is the serviceIndex value of a RelayConfig.
func serviceRefName(obj client.Object) []string {
	rc := obj.(*v1alpha1.RelayConfig)
	if rc.Spec.ForProvider.ServiceRef == nil {
		return nil
	}
	return []string{rc.Spec.ForProvider.ServiceRef.Name}
}

// providerConfigRef is the providerConfigIndex value of a RelayConfig:
// the kind and name of its provider config, and the namespace of a
// namespaced one.
func providerConfigRef(obj client.Object) []string {
	rc := obj.(*v1alpha1.RelayConfig)
	ref := rc.GetProviderConfigReference()
	if ref == nil {
		return nil
	}
	return []string{providerConfigKey(ref.Kind, rc.GetNamespace(), ref.Name)}
}

func providerConfigKey(kind, namespace, name string) string {
	if kind == v1alpha1.ProviderConfigKind {
		return kind + "/" + namespace + "/" + name
	}
	return kind + "/" + name
}

// relayConfigsUsing maps a provider config to the RelayConfigs that use it.
func relayConfigsUsing(c client.Client, log logging.Logger) handler.MapFunc {
	return func(ctx context.Context, pc client.Object) []reconcile.Request {
		kind := v1alpha1.ClusterProviderConfigKind
		if _, ok := pc.(*v1alpha1.ProviderConfig); ok {
			kind = v1alpha1.ProviderConfigKind
		}
		return requestsFor(ctx, c, log, pc.GetNamespace(), providerConfigIndex, providerConfigKey(kind, pc.GetNamespace(), pc.GetName()))
	}
}

// CachedSecrets selects the Secrets the manager caches: the provider's own
// (config, state and minted key Secrets).
func CachedSecrets() labels.Selector {
	r, err := labels.NewRequirement(LabelManagedBy, selection.Equals, []string{ManagedBy})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}

// relayConfigsFor maps a Service to the RelayConfigs that name it.
func relayConfigsFor(c client.Client, log logging.Logger) handler.MapFunc {
	return func(ctx context.Context, svc client.Object) []reconcile.Request {
		return requestsFor(ctx, c, log, svc.GetNamespace(), serviceIndex, svc.GetName())
	}
}

// requestsFor returns a request for each RelayConfig in namespace ("" for
// all) whose index field has value. A failed List (from the cache) loses
// only this event: each RelayConfig reads what changed at its next poll.
func requestsFor(ctx context.Context, c client.Client, log logging.Logger, namespace, field, value string) []reconcile.Request {
	l := &v1alpha1.RelayConfigList{}
	if err := c.List(ctx, l, client.InNamespace(namespace), client.MatchingFields{field: value}); err != nil {
		log.Info("Cannot list the RelayConfigs to reconcile; they see the change at their next poll", "index", field, "value", value, "error", err)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(l.Items))
	for _, rc := range l.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}})
	}
	return reqs
}
