package relayconfig

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// TestCountedAPI: each Tailscale API call is counted by outcome; a key
// minted and a device removed count once each, a failure not at all.
func TestCountedAPI(t *testing.T) {
	calls := func(call, outcome string) float64 {
		return testutil.ToFloat64(tailnetCalls.WithLabelValues(call, outcome))
	}
	snapshot := func() map[string]float64 {
		return map[string]float64{
			"create ok": calls("create_key", "ok"), "create error": calls("create_key", "error"),
			"get ok": calls("get_device", "ok"), "get not_found": calls("get_device", "not_found"),
			"delete ok": calls("delete_device", "ok"),
			"minted":    testutil.ToFloat64(keysMinted), "deleted": testutil.ToFloat64(devicesDeleted),
		}
	}
	before := snapshot()
	api := countedAPI{&fakeAPI{devices: map[string]*tailnet.Device{"dev-1": {ID: "dev-1"}}}}
	ctx := t.Context()
	if _, _, _, err := api.CreateAuthKey(ctx, tailnet.KeyRequest{Description: "r"}); err != nil {
		t.Fatal(err)
	}
	_, _ = api.Device(ctx, "dev-1")
	_, _ = api.Device(ctx, "dev-9")
	_ = api.DeleteDevice(ctx, "dev-1")
	failing := countedAPI{&fakeAPI{err: errors.New("500")}}
	_, _, _, _ = failing.CreateAuthKey(ctx, tailnet.KeyRequest{Description: "r"})

	now := snapshot()
	for what, want := range map[string]float64{
		"create ok": 1, "create error": 1, "get ok": 1, "get not_found": 1, "delete ok": 1, "minted": 1, "deleted": 1,
	} {
		if got := now[what] - before[what]; got != want {
			t.Errorf("%s: counted %v, want %v", what, got, want)
		}
	}
}
