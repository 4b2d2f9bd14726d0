package harness

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// RunManager starts a controller-runtime manager in this process and stops
// it when the test ends, logging what it stopped with.
func RunManager(t testing.TB, what string, mgr manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("%s stopped with: %v", what, err)
		}
	})
}
