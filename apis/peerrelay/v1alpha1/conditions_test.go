package v1alpha1_test

import (
	"testing"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// The PeerRelay shows the RelayConfigs' DeviceCleanup under the same name;
// the API package does not import the provider's to say so.
func TestDeviceCleanupIsTheRelayConfigs(t *testing.T) {
	if v1alpha1.ConditionDeviceCleanup != relayv1alpha1.ConditionDeviceCleanup {
		t.Errorf("ConditionDeviceCleanup %q, the RelayConfigs' is %q", v1alpha1.ConditionDeviceCleanup, relayv1alpha1.ConditionDeviceCleanup)
	}
}
