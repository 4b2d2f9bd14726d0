package fn

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
)

// TestReadInputs: what a composition depends on is read from the request;
// equal requests give equal composition keys, and a changed input another.
// read is the inputs of a PeerRelay with spec, observing obs.
func read(t *testing.T, spec string, obs map[resource.Name]resource.ObservedComposed) inputs {
	t.Helper()
	req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, spec)}}
	c, err := request.GetObservedCompositeResource(req)
	if err != nil {
		t.Fatal(err)
	}
	in, err := readInputs(req, c, observedState{observed: obs, reports: providerReports(obs)})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestReadInputs(t *testing.T) {
	observed := func(keys ...string) map[resource.Name]resource.ObservedComposed {
		m := map[resource.Name]resource.ObservedComposed{}
		for _, k := range keys {
			m[resource.Name(k)] = resource.ObservedComposed{Resource: composed.New()}
		}
		return m
	}
	cases := map[string]struct {
		reason   string
		observed map[resource.Name]resource.ObservedComposed
		want     []string
	}{
		"WaitedFor": {
			reason:   "Existing lists, sorted, the objects whose creation others wait for: StatefulSets, ServiceAccount, Role, RoleBinding.",
			observed: observed("statefulset-1", "rolebinding", "service-0", "statefulset-0", "serviceaccount", "relayconfig-0", "role"),
			want:     []string{"role", "rolebinding", "serviceaccount", "statefulset-0", "statefulset-1"},
		},
		"Nothing": {
			reason:   "Before anything exists, nothing is listed.",
			observed: observed(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := read(t, "replicas: 2", tc.observed)
			if in.Name != "my-relay" || in.Namespace != "team-a" || in.Spec["replicas"] != float64(2) {
				t.Errorf("%s\nread name %q, namespace %q, spec %v", tc.reason, in.Name, in.Namespace, in.Spec)
			}
			if diff := cmp.Diff(tc.want, in.Existing); diff != "" {
				t.Errorf("%s\nExisting (-want +got):\n%s", tc.reason, diff)
			}
			again, _, err := read(t, "replicas: 2", tc.observed).key()
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := in.key()
			other, _, _ := read(t, "replicas: 3", tc.observed).key()
			if first != again || first == other {
				t.Errorf("%s\ncomposition key: equal inputs give equal keys (%v), a changed spec another (%v)", tc.reason, first == again, first != other)
			}
		})
	}
}
