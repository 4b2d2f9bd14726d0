package relayconfig

import (
	"context"
	"errors"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

func TestStatusKeepingFinalizer(t *testing.T) {
	observed := v1alpha1.RelayConfigStatus{AtProvider: v1alpha1.RelayConfigObservation{Endpoints: []string{"203.0.113.10:41641"}, ConfigHash: "abc"}}
	observed.SetConditions(xpv2.Available())
	errBoom := errors.New("boom")

	cases := map[string]struct {
		reason     string
		updateErr  error
		want       v1alpha1.RelayConfigStatus
		wantErr    error
		finalizers []string
	}{
		"Added": {
			reason:     "The finalizer is written and the status Observe set survives the Update, which loads the stored object (no status) back.",
			want:       observed,
			finalizers: []string{managed.FinalizerName},
		},
		"UpdateFails": {
			reason:     "A failed write is returned; the observation is still kept for the status write that reports it.",
			updateErr:  errBoom,
			want:       observed,
			wantErr:    errBoom,
			finalizers: []string{managed.FinalizerName},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := &test.MockClient{MockUpdate: func(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
				// The API server answers with what it stored: the main
				// resource ignores status.
				obj.(*v1alpha1.RelayConfig).Status = v1alpha1.RelayConfigStatus{}
				return tc.updateErr
			}}
			rc := &v1alpha1.RelayConfig{Status: *observed.DeepCopy()}
			f := statusKeepingFinalizer{resource.NewAPIFinalizer(kube, managed.FinalizerName)}
			err := f.AddFinalizer(context.Background(), rc)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s\nAddFinalizer(): error %v, want %v", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, rc.Status); diff != "" {
				t.Errorf("%s\nstatus after AddFinalizer(): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.finalizers, rc.GetFinalizers()); diff != "" {
				t.Errorf("%s\nfinalizers: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
