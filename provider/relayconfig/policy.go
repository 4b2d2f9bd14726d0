package relayconfig

import (
	"fmt"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// The provider config's policy, checked here and nowhere else: which
// namespaces may use it (namespacePolicy), which tags keys and devices may
// carry (tagPolicy), and how long a RelayConfig being deleted waits for
// what it cannot reach (graceOver).

// credentialsGrace is how long a RelayConfig being deleted waits for its
// provider config and credentials to come back (a namespace deleted with
// its ProviderConfig and Secrets in it), or for the tailnet to accept its
// OAuth client again, before it goes without removing its device.
const credentialsGrace = 5 * time.Minute

// graceOver says whether a RelayConfig has been deleted for longer than
// credentialsGrace.
func graceOver(mg *v1alpha1.RelayConfig) bool {
	return meta.WasDeleted(mg) && time.Since(mg.GetDeletionTimestamp().Time) >= credentialsGrace
}

// namespacePolicy refuses a RelayConfig whose namespace the provider
// config's spec.policy.namespaces leaves out.
func namespacePolicy(spec *v1alpha1.ProviderConfigSpec, mg *v1alpha1.RelayConfig) error {
	if spec.Policy == nil || len(spec.Policy.Namespaces) == 0 || slices.Contains(spec.Policy.Namespaces, mg.GetNamespace()) {
		return nil
	}
	ref := mg.GetProviderConfigReference()
	return errPolicy{fmt.Errorf("%s %s may not be used from namespace %s: its spec.policy.namespaces allows %v", ref.Kind, ref.Name, mg.GetNamespace(), spec.Policy.Namespaces)}
}

// tagPolicy is a provider config's spec.policy.tags: the tags keys may be
// minted with, and the only tags a device may carry for the provider to
// take it as a replica's (to delete it, or to probe it). Empty allows any
// tag. The one place the policy's tags are checked.
type tagPolicy []string

// outside returns the tags the policy does not allow.
func (p tagPolicy) outside(tags []string) []string {
	if len(p) == 0 {
		return nil
	}
	var bad []string
	for _, t := range tags {
		if !slices.Contains(p, t) {
			bad = append(bad, t)
		}
	}
	return bad
}

// relayDevice says whether a device with these tags may be probed as a
// relay's under the policy: none outside it and, when the policy names
// tags, tagged (the empty set is a subset of any, and a person's device
// carries no tags). A policy naming no tags restricts nothing.
func (p tagPolicy) relayDevice(tags []string) bool {
	return len(p.outside(tags)) == 0 && (len(p) == 0 || len(tags) > 0)
}
