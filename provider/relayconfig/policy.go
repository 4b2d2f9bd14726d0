package relayconfig

import "slices"

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
