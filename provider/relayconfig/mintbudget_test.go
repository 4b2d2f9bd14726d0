package relayconfig

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// TestMintBudgets: a namespace mints at most its burst at once and then
// one a refill interval; a provider config across namespaces the same at
// its own bounds; a refused mint spends neither budget.
func TestMintBudgets(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	b := newMintBudgets()
	b.now = func() time.Time { return now }
	in := func(ns, config string) *v1alpha1.RelayConfig {
		rc := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r-0"}}
		rc.Status.AtProvider.Admission = &v1alpha1.Admission{Kind: v1alpha1.ClusterProviderConfigKind, Name: config}
		return rc
	}
	spent := func(rc *v1alpha1.RelayConfig) string {
		var e errBudgetSpent
		if err := b.spend(rc); errors.As(err, &e) {
			return e.whose
		} else if err != nil {
			t.Fatal(err)
		}
		return ""
	}

	for i := range namespaceMintBurst {
		if w := spent(in("hostile", "shared")); w != "" {
			t.Fatalf("mint %d in a fresh namespace refused: %s", i+1, w)
		}
	}
	if w := spent(in("hostile", "shared")); w != "namespace hostile" {
		t.Fatalf("mint %d in one namespace: refused by %q, want the namespace's budget", namespaceMintBurst+1, w)
	}
	if w := spent(in("victim", "shared")); w != "" {
		t.Fatalf("another namespace's first mint refused by %q: one tenant spent another's budget", w)
	}
	now = now.Add(namespaceMintEvery)
	if w := spent(in("hostile", "shared")); w != "" {
		t.Fatalf("a refill interval later: refused by %q", w)
	}

	// The provider config's budget, spent across namespaces.
	for i := range configMintBurst {
		ns := "team-" + string(rune('a'+i/namespaceMintBurst))
		if w := spent(in(ns, "busy")); w != "" {
			t.Fatalf("mint %d through the config (namespace %s): refused by %q", i+1, ns, w)
		}
	}
	if w := spent(in("fresh", "busy")); w != "provider config ClusterProviderConfig busy" {
		t.Fatalf("mint %d through one provider config: refused by %q, want the config's budget", configMintBurst+1, w)
	}
	// Refused by the config: the namespace's budget is not spent.
	for i := range namespaceMintBurst {
		if w := spent(in("fresh", "other")); w != "" {
			t.Fatalf("namespace fresh's mint %d, after a refused one: refused by %q", i+1, w)
		}
	}
}
