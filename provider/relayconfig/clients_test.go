package relayconfig

import (
	"fmt"
	"testing"
)

// TestClientCacheEvictsLeastRecentlyUsed: a tenant cycling through more
// settings than the cache holds (regions, Secrets) evicts only clients no
// one used lately: a client in use all along is built once.
func TestClientCacheEvictsLeastRecentlyUsed(t *testing.T) {
	var c clientCache[int]
	builds := map[string]int{}
	get := func(s string) {
		if _, err := c.get([]string{s}, func() (int, error) { builds[s]++; return builds[s], nil }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 * maxClients {
		get("victim")
		get(fmt.Sprintf("tenant-region-%d", i))
	}
	if builds["victim"] != 1 {
		t.Errorf("the client in use all along was built %d times, want 1", builds["victim"])
	}
	get("tenant-region-0") // long evicted
	if builds["tenant-region-0"] != 2 {
		t.Errorf("a client unused for %d others was built %d times, want 2 (evicted, made again)", 3*maxClients, builds["tenant-region-0"])
	}
}
