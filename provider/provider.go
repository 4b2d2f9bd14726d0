// Package provider wires provider-peerrelay's controllers into a
// controller-runtime manager.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/config"
	"github.com/peerrelay/peerrelay/provider/relayconfig"
)

// relayConfigCRD names the RelayConfig's CRD, which Crossplane creates
// once a ManagedResourceActivationPolicy activates it (safe-start).
const relayConfigCRD = "relayconfigs." + v1alpha1.Group

// ManagerOptions tune the manager.
type ManagerOptions struct {
	SyncPeriod     time.Duration
	LeaderElection bool
	// LeaderElectionNamespace holds the lease; "" is the pod's own
	// namespace (in-cluster only).
	LeaderElectionNamespace string
	MetricsAddress          string // "0" turns metrics off
	HealthAddress           string // "" or "0" turns probes off
	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool
}

// NewManager returns a manager whose cache holds only the Secrets labelled
// as this provider's (its own and the relays' state Secrets), stripped to
// what it reads (relayconfig.StripSecret): auth keys and credentials are
// read uncached, so the provider never keeps every Secret of the cluster
// in memory, nor a tenant's labelled Secrets whole.
func NewManager(cfg *rest.Config, scheme *runtime.Scheme, o ManagerOptions) (ctrl.Manager, error) {
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// The safe-start gate watches CRDs (Setup).
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	sync := o.SyncPeriod
	health := o.HealthAddress
	if health == "" {
		health = "0"
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "crossplane-leader-election-provider-peerrelay",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// A stopping leader hands over at once: the next revision's pod, or
		// the second replica, need not wait out the lease.
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddress},
		HealthProbeBindAddress:        health,
		Controller:                    ctrlconfig.Controller{SkipNameValidation: &o.SkipNameValidation},
		Cache: cache.Options{
			SyncPeriod: &sync,
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}: {Label: relayconfig.CachedSecrets(), Transform: relayconfig.StripSecret},
				// The safe-start gate (Setup) waits for one CRD: the cache
				// holds that one, without its schema, not every CRD of the
				// cluster (hundreds, with the Upbound providers).
				&apiextensionsv1.CustomResourceDefinition{}: {
					Field:     fields.OneTermEqualSelector("metadata.name", relayConfigCRD),
					Transform: customresourcesgate.TransformStripCRDSchema,
				},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	return mgr, addHealthChecks(mgr)
}

// addHealthChecks serves /healthz (the process answers) and /readyz (its
// caches have synced, so it sees what it reconciles). A replica waiting for
// leadership is ready too: it is the standby a Deployment should keep.
func addHealthChecks(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("cache-sync", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	})
}

// Metrics registers, with the manager's registry (served on the metrics
// address), what Crossplane providers report about their managed
// resources: the managed reconciler's times to first reconcile, readiness,
// deletion and drift, and how many RelayConfigs exist, are ready and are
// synced, recorded every poll; and the provider's own (relayconfig.
// Collectors). Once per process.
func Metrics(poll time.Duration) (*controller.MetricOptions, error) {
	mr, state := managed.NewMRMetricRecorder(), statemetrics.NewMRStateMetrics()
	for _, c := range append([]prometheus.Collector{mr, state}, relayconfig.Collectors()...) {
		if err := metrics.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	return &controller.MetricOptions{PollStateMetricInterval: poll, MRMetrics: mr, MRStateMetrics: state}, nil
}

// Setup adds every controller. With o.Gate set, as the provider runs with
// Crossplane's safe-start capability, the RelayConfig controller starts
// only once the RelayConfig CRD is established: Crossplane creates it when
// a ManagedResourceActivationPolicy activates its ManagedResourceDefinition
// (the Configuration's does). The provider config controllers start at
// once: their CRDs come with the package.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	if err := config.Setup(mgr, o); err != nil {
		return err
	}
	if o.Gate == nil {
		return relayconfig.Setup(mgr, o)
	}
	if err := customresourcesgate.Setup(mgr, o); err != nil {
		return err
	}
	failed := make(gatedSetupFailure, 1)
	o.Gate.Register(func() {
		if err := waitForDiscovery(mgr.GetRESTMapper(), v1alpha1.RelayConfigGroupVersionKind); err != nil {
			failed <- err
			return
		}
		if err := relayconfig.Setup(mgr, o); err != nil {
			failed <- err
		}
	}, v1alpha1.RelayConfigGroupVersionKind)
	return mgr.Add(failed)
}

// discoveryBackoff bounds waitForDiscovery: about a minute in all.
var discoveryBackoff = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: 10 * time.Second, Steps: 12}

// waitForDiscovery waits until the API server's discovery lists gvk. The
// gate opens when the CRD is Established, but the API server adds a new
// kind to its discovery documents a moment later, in another controller;
// until then the manager's REST mapper (which reloads a group on every
// miss) answers "no matches for kind", and Setup's informers and indexes
// could not start. Only that miss is waited out; any other error is final.
func waitForDiscovery(mapper meta.RESTMapper, gvk schema.GroupVersionKind) error {
	var last error
	err := wait.ExponentialBackoff(discoveryBackoff, func() (bool, error) {
		_, last = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(last) {
			return false, nil
		}
		return last == nil, last
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("the API server's discovery does not list %s: %w", gvk.Kind, last)
	}
	return err
}

// gatedSetupFailure stops the manager when a controller set up after start
// (Setup's gate) fails to, as a failure at start would: the provider's pod
// restarts rather than running without its controller.
type gatedSetupFailure chan error

func (f gatedSetupFailure) Start(ctx context.Context) error {
	select {
	case err := <-f:
		return fmt.Errorf("cannot start the RelayConfig controller: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// NeedLeaderElection is false: it watches for a failure wherever the gate
// opens (on the leader, whose crd-gate controller runs).
func (gatedSetupFailure) NeedLeaderElection() bool { return false }
