package relayconfig

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Mint budgets. Every key minted spends from two: its namespace's and its
// provider config's. The per-replica throttle (tooSoon) bounds one
// RelayConfig; these bound a tenant with many RelayConfigs (or one
// deleting its key Secrets in a loop), so that it can neither fill the
// tailnet with pre-authorised keys nor spend the OAuth client's request
// budget every other team shares (a 429 from the Tailscale API would stop
// them all). A budget refills steadily; a full one covers a new
// PeerRelay's replicas minting at once.
const (
	namespaceMintBurst = 20
	namespaceMintEvery = 30 * time.Second
	configMintBurst    = 100
	configMintEvery    = 3 * time.Second
	// budgetsKept bounds the budgets remembered: the least recently used
	// goes (and comes back full), so a tenant cannot grow the provider.
	budgetsKept = 4096
)

// mintBudgets are the provider's mint budgets, kept in memory by the
// leader: a new leader starts them full, which costs at most one burst.
type mintBudgets struct {
	mu       sync.Mutex
	limiters *lru.Cache
	now      func() time.Time
}

func newMintBudgets() *mintBudgets {
	return &mintBudgets{limiters: lru.New(budgetsKept), now: time.Now}
}

// errBudgetSpent is a mint refused because a budget is spent. Its message
// names the budget, never a count that changes between attempts.
type errBudgetSpent struct {
	whose string
	burst int
	every time.Duration
}

func (e errBudgetSpent) Error() string {
	return fmt.Sprintf("%s has spent its budget of minted keys (%d at once, then one every %s): the key is minted when the budget refills", e.whose, e.burst, e.every)
}

// spend takes one key from the namespace's budget and the provider
// config's, or neither: it returns errBudgetSpent naming the one spent.
// A nil mintBudgets has no bounds.
func (b *mintBudgets) spend(mg *v1alpha1.RelayConfig) error {
	if b == nil {
		return nil
	}
	now := b.now()
	namespace := b.limiter("namespace/"+mg.GetNamespace(), namespaceMintEvery, namespaceMintBurst)
	config := b.limiter("config/"+admittedBy(mg), configMintEvery, configMintBurst)
	r := namespace.ReserveN(now, 1)
	if r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return errBudgetSpent{whose: "namespace " + mg.GetNamespace(), burst: namespaceMintBurst, every: namespaceMintEvery}
	}
	if !config.AllowN(now, 1) {
		r.CancelAt(now)
		return errBudgetSpent{whose: "provider config " + admittedBy(mg), burst: configMintBurst, every: configMintEvery}
	}
	return nil
}

func (b *mintBudgets) limiter(key string, every time.Duration, burst int) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.limiters.Get(key); ok {
		return l.(*rate.Limiter)
	}
	l := rate.NewLimiter(rate.Every(every), burst)
	b.limiters.Add(key, l)
	return l
}

// admittedBy names the provider config that admitted mg, by the
// provider's own record (its kind and name).
func admittedBy(mg *v1alpha1.RelayConfig) string {
	a := mg.Status.AtProvider.Admission
	if a == nil {
		return "(not admitted)"
	}
	if a.Kind == v1alpha1.ProviderConfigKind {
		return a.Kind + " " + mg.GetNamespace() + "/" + a.Name
	}
	return a.Kind + " " + a.Name
}
