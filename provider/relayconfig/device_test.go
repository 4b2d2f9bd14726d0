package relayconfig

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/resolve"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// TestDeletionChecksDeviceOnce: a RelayConfig being deleted whose config
// Secret went first asks the tailnet about its device once per reconcile:
// Observe's answer is Delete's. A device that is not the replica's gives
// one Warning, not two.
func TestDeletionChecksDeviceOnce(t *testing.T) {
	for name, tc := range map[string]struct {
		device      tailnet.Device
		wantDeleted []string
		wantEvents  int
	}{
		"Replicas":       {device: tailnet.Device{ID: "dev-1", Hostname: "r-0", Tags: []string{"tag:relay"}}, wantDeleted: []string{"dev-1"}},
		"NotTheReplicas": {device: tailnet.Device{ID: "dev-1", Hostname: "alice-laptop", Tags: []string{"tag:relay"}}, wantEvents: 1},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(service())
			api := &fakeAPI{devices: map[string]*tailnet.Device{"dev-1": &tc.device}}
			var recorded events
			e := &external{kube: c, read: c, resolver: &resolve.Resolver{}, api: api, record: &recorded}
			mg := relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.DeviceID = "dev-1"
				at := metav1.NewTime(time.Now())
				rc.SetDeletionTimestamp(&at)
			})
			obs, err := e.Observe(t.Context(), mg)
			if err != nil {
				t.Fatal(err)
			}
			if obs.ResourceExists {
				if _, err := e.Delete(t.Context(), mg); err != nil {
					t.Fatal(err)
				}
			}
			if api.gets != 1 {
				t.Errorf("the device was looked up %d times in one reconcile, want 1", api.gets)
			}
			if diff := cmp.Diff(tc.wantDeleted, api.deleted, cmpEmpty); diff != "" {
				t.Errorf("devices deleted (-want +got):\n%s", diff)
			}
			if len(recorded) != tc.wantEvents {
				t.Errorf("events %v, want %d", recorded, tc.wantEvents)
			}
		})
	}
}
