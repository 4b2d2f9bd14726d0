package relayconfig

import (
	"context"
	"sync"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// TestQuietStatusWriter: the managed reconciler's closing status update is
// skipped only when it would change nothing: the cache holds the version
// the reconcile read, with the same status, and that version is not older
// than this writer's own last write.
func TestQuietStatusWriter(t *testing.T) {
	at := func(rv, endpoint string) *v1alpha1.RelayConfig {
		rc := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r-0", UID: "uid", ResourceVersion: rv}}
		rc.Status.AtProvider.Endpoints = []string{endpoint}
		return rc
	}
	cases := map[string]struct {
		reason  string
		cached  *v1alpha1.RelayConfig
		wrote   string // the resourceVersion this writer's last update made; "" none
		update  *v1alpha1.RelayConfig
		wantOut bool
	}{
		"Unchanged": {
			reason: "The status the cached version holds, read at that version: nothing to send.",
			cached: at("1", "203.0.113.5:41641"), update: at("1", "203.0.113.5:41641"), wantOut: false,
		},
		"Changed": {
			reason: "A new status is sent.",
			cached: at("1", "203.0.113.5:41641"), update: at("1", "203.0.113.6:41641"), wantOut: true,
		},
		"CacheBehindOwnWrite": {
			reason: "The cache has not caught up with this writer's last write (version 2): equal to the stale copy proves nothing, so it is sent (and fails on the resourceVersion).",
			cached: at("1", "203.0.113.5:41641"), wrote: "2", update: at("1", "203.0.113.5:41641"), wantOut: true,
		},
		"CacheCaughtUp": {
			reason: "The cache holds this writer's last write: equal is equal.",
			cached: at("2", "203.0.113.5:41641"), wrote: "2", update: at("2", "203.0.113.5:41641"), wantOut: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sent := false
			kube := &test.MockClient{
				MockGet: func(_ context.Context, _ client.ObjectKey, obj client.Object) error {
					tc.cached.DeepCopyInto(obj.(*v1alpha1.RelayConfig))
					return nil
				},
				MockStatusUpdate: func(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
					sent = true
					return nil
				},
			}
			written := &sync.Map{}
			if tc.wrote != "" {
				written.Store(tc.update.GetUID(), tc.wrote)
			}
			c := quietStatusClient{Client: kube, written: written}
			if err := c.Status().Update(t.Context(), tc.update); err != nil {
				t.Fatal(err)
			}
			if sent != tc.wantOut {
				t.Errorf("%s\nsent %v, want %v", tc.reason, sent, tc.wantOut)
			}
		})
	}
}
