package relayconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/provider/relayconfig"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// TestTenantSecretsDoNotGrowTheCache: a tenant may put the provider's
// label on its own Secrets; the provider's cache, which selects on it,
// keeps of a 1 MiB one only what the provider reads, bounded. Without
// relayconfig.StripSecret the cache holds the whole mebibyte.
func TestTenantSecretsDoNotGrowTheCache(t *testing.T) {
	pe := providertest.Start(t, providertest.Options{})
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 1<<20-1024)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "heavy", Namespace: pe.NS, Labels: map[string]string{relayconfig.LabelManagedBy: relayconfig.ManagedBy}},
		Data:       map[string][]byte{tsconfig.FileName: big},
	}
	must(t, pe.Client.Create(ctx, s))
	harness.Eventually(t, 20*time.Second, "the provider's cache has the tenant's Secret", func(ctx context.Context) error {
		cached := &corev1.Secret{}
		if err := pe.Cache.Get(ctx, types.NamespacedName{Namespace: pe.NS, Name: "heavy"}, cached); err != nil {
			return err
		}
		size := 0
		for k, v := range cached.Data {
			size += len(k) + len(v)
		}
		if size > 1024 {
			return fmt.Errorf("the cache holds %d bytes of its data", size)
		}
		return nil
	})
}
