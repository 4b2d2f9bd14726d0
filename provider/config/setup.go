// Package config runs the ProviderConfig and ClusterProviderConfig
// controllers: they count users and block deleting a config in use.
package config

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Setup adds both provider config controllers.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	for _, kind := range []struct {
		config client.Object
		gvk    resource.ProviderConfigKinds
	}{
		{&v1alpha1.ProviderConfig{}, resource.ProviderConfigKinds{Config: v1alpha1.ProviderConfigGroupVersionKind, Usage: v1alpha1.ProviderConfigUsageGroupVersionKind, UsageList: v1alpha1.ProviderConfigUsageListGroupVersionKind}},
		{&v1alpha1.ClusterProviderConfig{}, resource.ProviderConfigKinds{Config: v1alpha1.GroupVersion.WithKind(v1alpha1.ClusterProviderConfigKind), Usage: v1alpha1.ProviderConfigUsageGroupVersionKind, UsageList: v1alpha1.ProviderConfigUsageListGroupVersionKind}},
	} {
		name := providerconfig.ControllerName(kind.gvk.Config.GroupKind().String())
		if err := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			WithOptions(o.ForControllerRuntime()).
			For(kind.config).
			Watches(&v1alpha1.ProviderConfigUsage{}, &resource.EnqueueRequestForProviderConfig{Kind: kind.gvk.Config.Kind}).
			Complete(providerconfig.NewReconciler(mgr, kind.gvk,
				providerconfig.WithLogger(o.Logger.WithValues("controller", name)),
				providerconfig.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))))); err != nil { //nolint:staticcheck // crossplane-runtime v2.4.0 records through the old events API
			return err
		}
	}
	return nil
}
