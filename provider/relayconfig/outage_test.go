package relayconfig_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/test/harness"
)

// outage is how long TestTailscaleAPIOutage holds the API down: long
// enough for the managed reconciler's backoff (1 s doubling to 60 s) to
// reach its cap.
const outage = 90 * time.Second

// TestTailscaleAPIOutage: a replica needs a new key while the Tailscale
// API answers 500 for 90 s, each answer with a request ID of its own. The
// RelayConfig says so once and is not written again; the provider's
// requests follow the reconciler's backoff (attempts 1, 3, 7, 15, 31 and
// 63 s after the first failure: 6), not a retry per status write; once the
// API is back the key is minted within one backoff step (60 s).
func TestTailscaleAPIOutage(t *testing.T) {
	t.Parallel() // its outage is mostly waiting
	testOutage(t, tailnettest.Fault{Status: http.StatusInternalServerError}, true)
}

// TestTailscaleAPIOutageUnknownWords: the same outage, each 500 carrying
// words no scrubbing knows (a random token and a timestamp in a spelling of
// their own). The condition changes on every attempt, and still the
// requests follow the backoff: the provider's own status writes do not
// wake it.
func TestTailscaleAPIOutageUnknownWords(t *testing.T) {
	t.Parallel()
	testOutage(t, tailnettest.Fault{Status: http.StatusInternalServerError, Words: "internal error (trace %s)"}, false)
}

// testOutage holds fault for the outage; stableWords says the RelayConfig
// is not written meanwhile, since its condition's words do not change.
func testOutage(t *testing.T, fault tailnettest.Fault, stableWords bool) {
	api, e := startMinting(t, nil)
	ctx := context.Background()
	e.waitFor(t, "relay-0", "the first key", func(rc *v1alpha1.RelayConfig) bool { return rc.Status.AtProvider.AuthKeyID == "k1" })

	// The API goes down; the key expires unused, 30 s after it was minted
	// (played by dating the provider's record back): a new one is needed.
	e.dateMintBack(t, "relay-0")
	api.SetFault(fault)
	minted := &corev1.Secret{}
	must(t, e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "relay-0-authkey"}, minted))
	minted.Annotations["relay.peerrelay.io/authkey-expires"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	must(t, e.c.Update(ctx, minted))
	failed := e.waitFor(t, "relay-0", "Synced=False from the outage", func(rc *v1alpha1.RelayConfig) bool {
		return rc.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionFalse
	})
	before := api.Faulted()
	time.Sleep(outage)
	n := api.Faulted() - before
	t.Logf("requests in %s of outage after the first failure: %d", outage, n)
	if n < 3 || n > 10 {
		t.Errorf("%d requests in %s of outage: want the reconciler's backoff, 6 attempts (3 to 10)", n, outage)
	}
	rc := e.get(t, "relay-0")
	if stableWords {
		if rc.ResourceVersion != failed.ResourceVersion {
			t.Errorf("the RelayConfig was written during the outage: Synced %q, then %q", failed.GetCondition(xpv2.TypeSynced).Message, rc.GetCondition(xpv2.TypeSynced).Message)
		}
		if msg := rc.GetCondition(xpv2.TypeSynced).Message; strings.Contains(msg, "request id") || !strings.Contains(msg, "internal server error (500)") {
			t.Errorf("Synced: %q, want the API's error without its request ID", msg)
		}
	}

	api.SetFault(tailnettest.Fault{})
	back := time.Now()
	harness.Eventually(t, 70*time.Second, "a key minted after the outage", func(ctx context.Context) error {
		if rc := e.get(t, "relay-0"); rc.Status.AtProvider.AuthKeyID != "k2" {
			return fmt.Errorf("key %q", rc.Status.AtProvider.AuthKeyID)
		}
		return nil
	})
	t.Logf("a key minted %s after the API came back", time.Since(back).Round(100*time.Millisecond))
}
