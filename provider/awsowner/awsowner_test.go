package awsowner

import "testing"

func TestOwned(t *testing.T) {
	cases := map[string]struct {
		reason    string
		namespace string
		tags      map[string]string
		want      bool
	}{
		"NamespaceTag": {
			reason:    "An Elastic IP the platform team set aside for the namespace.",
			namespace: "team-a", tags: map[string]string{"peerrelay.io/namespace": "team-a"}, want: true,
		},
		"RelayTag": {
			reason:    "What the function composed for a PeerRelay in the namespace.",
			namespace: "team-a", tags: map[string]string{"peerrelay.io/relay": "team-a/edge"}, want: true,
		},
		"Untagged": {
			reason:    "An untagged resource is no namespace's.",
			namespace: "team-a", tags: map[string]string{"Name": "team-a"},
		},
		"OtherNamespace": {
			reason:    "Another team's Elastic IP.",
			namespace: "team-a", tags: map[string]string{"peerrelay.io/namespace": "team-b"},
		},
		"OtherRelay": {
			reason:    "Another team's composed load balancer.",
			namespace: "team-a", tags: map[string]string{"peerrelay.io/relay": "team-b/edge"},
		},
		"RelayPrefixOfLongerNamespace": {
			reason:    "team-ab's PeerRelay is not team-a's, though its value starts with team-a.",
			namespace: "team-a", tags: map[string]string{"peerrelay.io/relay": "team-ab/edge"},
		},
		"RelayWithoutName": {
			reason:    "A relay tag of the namespace alone names no PeerRelay the function composed for.",
			namespace: "team-a", tags: map[string]string{"peerrelay.io/relay": "team-a/"},
		},
		"NoNamespace": {
			reason: "Without the RelayConfig's namespace nothing is owned, whatever the tags.",
			tags:   map[string]string{"peerrelay.io/namespace": "", "peerrelay.io/relay": "/x"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Owned(tc.namespace, tc.tags); got != tc.want {
				t.Errorf("%s\nOwned(%q, %v) = %v, want %v", tc.reason, tc.namespace, tc.tags, got, tc.want)
			}
		})
	}
}
