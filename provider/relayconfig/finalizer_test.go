package relayconfig

import (
	"context"
	"errors"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			// The API server answers an Update with what it stored: the
			// main resource ignores status.
			stored := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: ns}}
			kube := newCluster(stored)
			if tc.updateErr != nil {
				kube.fail["update RelayConfig/r-0"] = tc.updateErr
			}
			rc := stored.DeepCopy()
			if err := kube.Get(t.Context(), client.ObjectKeyFromObject(rc), rc); err != nil {
				t.Fatal(err)
			}
			rc.Status = *observed.DeepCopy()
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
