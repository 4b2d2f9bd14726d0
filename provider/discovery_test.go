package provider

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// laggingDiscovery is a REST mapper whose discovery lists the RelayConfig
// only from its misses-th lookup on, as the API server's does a moment
// after the CRD is Established.
type laggingDiscovery struct {
	*meta.DefaultRESTMapper
	misses, lookups int
	err             error // answered instead of a miss, when set
}

func (m *laggingDiscovery) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.lookups++
	if m.err != nil {
		return nil, m.err
	}
	if m.lookups == m.misses+1 {
		m.Add(v1alpha1.RelayConfigGroupVersionKind, meta.RESTScopeNamespace)
	}
	return m.DefaultRESTMapper.RESTMapping(gk, versions...)
}

func TestWaitForDiscovery(t *testing.T) {
	defer func(b wait.Backoff) { discoveryBackoff = b }(discoveryBackoff)
	discoveryBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
	gvk := v1alpha1.RelayConfigGroupVersionKind
	final := errors.New("the API server refused")

	cases := map[string]struct {
		reason      string
		mapper      *laggingDiscovery
		wantErr     bool
		wantLookups int
	}{
		"ListedAtOnce": {
			reason:      "A kind discovery already lists is set up after one lookup.",
			mapper:      &laggingDiscovery{misses: 0},
			wantLookups: 1,
		},
		"ListedLate": {
			reason:      "Misses while discovery lags are waited out.",
			mapper:      &laggingDiscovery{misses: 3},
			wantLookups: 4,
		},
		"NeverListed": {
			reason:      "A kind discovery never lists fails once the backoff is spent, so the provider restarts.",
			mapper:      &laggingDiscovery{misses: 100},
			wantErr:     true,
			wantLookups: 5,
		},
		"OtherError": {
			reason:      "Any error but a miss is final at once.",
			mapper:      &laggingDiscovery{err: final},
			wantErr:     true,
			wantLookups: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.mapper.DefaultRESTMapper = meta.NewDefaultRESTMapper([]schema.GroupVersion{gvk.GroupVersion()})
			err := waitForDiscovery(tc.mapper, gvk)
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nwaitForDiscovery: got %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if tc.mapper.lookups != tc.wantLookups {
				t.Errorf("%s\nlookups: got %d, want %d", tc.reason, tc.mapper.lookups, tc.wantLookups)
			}
			if tc.mapper.err != nil && !errors.Is(err, final) {
				t.Errorf("%s\ngot %v, want the API server's error", tc.reason, err)
			}
		})
	}
}
