package crossplane

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerrelay/peerrelay/test/harness"
)

// activationPolicy: Crossplane installs the configuration package's
// ManagedResourceActivationPolicy with the package, owned by its revision,
// as it does the XRDs and Compositions (test/render checks what it lists).
func (s *system) activationPolicy(ctx context.Context, t *testing.T) {
	var mrap *unstructured.Unstructured
	harness.Eventually(t, time.Minute, "ManagedResourceActivationPolicy peerrelay-aws from the package", func(context.Context) error {
		var err error
		mrap, err = s.Get(ctx, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceActivationPolicy", "", "peerrelay-aws")
		return err
	})
	owners := mrap.GetOwnerReferences()
	if len(owners) == 0 || owners[0].Kind != "ConfigurationRevision" {
		t.Errorf("owners %v: want the ConfigurationRevision that installed it", owners)
	}
	if act, _, _ := unstructured.NestedStringSlice(mrap.Object, "spec", "activate"); !slices.Contains(act, "eips.ec2.aws.m.upbound.io") {
		t.Errorf("spec.activate %v", act)
	}
}
