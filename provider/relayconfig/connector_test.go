package relayconfig

import (
	"context"
	"errors"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// TestConnectTracksUsage: Connect records the provider config usage of a
// live RelayConfig, and skips it for one being deleted, where a terminating
// namespace refuses the usage and a failing Connect would keep the
// finalizer for ever.
func TestConnectTracksUsage(t *testing.T) {
	errTerminating := errors.New(`unable to create new content in namespace team-a because it is being terminated`)
	cases := map[string]struct {
		reason    string
		deleting  bool
		wantErr   bool
		wantTrack bool
	}{
		"Live": {
			reason:    "A live RelayConfig's usage is tracked, and a refusal fails Connect.",
			wantErr:   true,
			wantTrack: true,
		},
		"Deleting": {
			reason:   "A RelayConfig being deleted connects without tracking, so Delete runs and the finalizer goes.",
			deleting: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tracked := false
			kube := &test.MockClient{
				MockGet: func(_ context.Context, key client.ObjectKey, obj client.Object) error {
					if _, ok := obj.(*v1alpha1.ProviderConfigUsage); ok {
						return kerrors.NewNotFound(schema.GroupResource{Resource: "providerconfigusages"}, key.Name)
					}
					return nil // the ClusterProviderConfig, with an empty spec
				},
				MockCreate: func(context.Context, client.Object, ...client.CreateOption) error {
					tracked = true
					return errTerminating
				},
			}
			c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{})}
			mg := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: "team-a", UID: "uid"}}
			mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "default"})
			if tc.deleting {
				now := metav1.Now()
				mg.SetDeletionTimestamp(&now)
			}
			_, err := c.Connect(t.Context(), mg)
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nConnect error: %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if tracked != tc.wantTrack {
				t.Errorf("%s\ntracked: %v, want %v", tc.reason, tracked, tc.wantTrack)
			}
		})
	}
}
