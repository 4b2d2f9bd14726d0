package crossplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerrelay/peerrelay/test/harness"
)

// activationPolicy: Crossplane installs the configuration package's
// ManagedResourceActivationPolicies with the package, owned by its revision,
// as it does the XRDs and Compositions (test/render checks what they list).
// provider-peerrelay is safe-start: its RelayConfig's
// ManagedResourceDefinition is Inactive until a policy activates it, and
// the Configuration's policy peerrelay is what does.
func (s *system) activationPolicy(ctx context.Context, t *testing.T) {
	for policy, kind := range map[string]string{"peerrelay-aws": "eips.ec2.aws.m.upbound.io", "peerrelay": "relayconfigs.relay.peerrelay.io"} {
		var mrap *unstructured.Unstructured
		harness.Eventually(t, time.Minute, "ManagedResourceActivationPolicy "+policy+" from the package", func(context.Context) error {
			var err error
			mrap, err = s.Get(ctx, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceActivationPolicy", "", policy)
			return err
		})
		owners := mrap.GetOwnerReferences()
		if len(owners) == 0 || owners[0].Kind != "ConfigurationRevision" {
			t.Errorf("%s: owners %v: want the ConfigurationRevision that installed it", policy, owners)
		}
		if act, _, _ := unstructured.NestedStringSlice(mrap.Object, "spec", "activate"); !slices.Contains(act, kind) {
			t.Errorf("%s: spec.activate %v", policy, act)
		}
	}

	revs, err := s.List(ctx, "pkg.crossplane.io/v1", "ProviderRevision", "")
	if err != nil {
		t.Fatal(err)
	}
	safeStart := false
	for _, r := range revs {
		img, _, _ := unstructured.NestedString(r.Object, "spec", "image")
		caps, _, _ := unstructured.NestedStringSlice(r.Object, "status", "capabilities")
		if strings.Contains(img, "provider-peerrelay") && slices.Contains(caps, "safe-start") {
			safeStart = true
		}
	}
	if !safeStart {
		t.Error("no provider-peerrelay ProviderRevision with the safe-start capability")
	}
	const mrd = "relayconfigs.relay.peerrelay.io"
	harness.Eventually(t, time.Minute, "the RelayConfig MRD activated by policy peerrelay", func(context.Context) error {
		m, err := s.Get(ctx, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition", "", mrd)
		if err != nil {
			return err
		}
		if st, _, _ := unstructured.NestedString(m.Object, "spec", "state"); st != "Active" {
			return fmt.Errorf("MRD %s: spec.state %q", mrd, st)
		}
		p, err := s.Get(ctx, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceActivationPolicy", "", "peerrelay")
		if err != nil {
			return err
		}
		if act, _, _ := unstructured.NestedStringSlice(p.Object, "status", "activated"); !slices.Contains(act, mrd) {
			return fmt.Errorf("policy peerrelay: status.activated %v", act)
		}
		return nil
	})
}
