package fn

import (
	"slices"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
)

func TestCreationOrder(t *testing.T) {
	access := podAccess(t, nil)
	sts := &fnv1.Resource{Resource: mustStruct(t, "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: my-relay-0, namespace: team-a}")}
	cases := map[string]struct {
		reason   string
		observed map[string]*fnv1.Resource
		want     []string // the RoleBinding and StatefulSets composed
	}{
		"FirstReconcile": {
			reason: "Nothing exists yet: a RoleBinding to a Role that does not exist is refused, and so is a pod whose ServiceAccount does not.",
		},
		"RoleExists": {
			reason:   "The Role exists: the RoleBinding is composed; the StatefulSets wait for it, as containerboot could not write its state Secret.",
			observed: map[string]*fnv1.Resource{keyServiceAccount: access[keyServiceAccount], keyRole: access[keyRole]},
			want:     []string{keyRoleBinding},
		},
		"PodAccessExists": {
			reason:   "ServiceAccount, Role and RoleBinding exist: every replica's StatefulSet is composed.",
			observed: access,
			want:     []string{keyRoleBinding, "statefulset-0", "statefulset-1"},
		},
		"ExistingStayComposed": {
			reason:   "What exists stays composed while what it waited for is being recreated: dropping it would delete it, and a StatefulSet its running pod.",
			observed: map[string]*fnv1.Resource{keyRoleBinding: access[keyRoleBinding], "statefulset-0": sts},
			want:     []string{keyRoleBinding, "statefulset-0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2"), Resources: tc.observed}})
			var got []string
			for k := range rsp.GetDesired().GetResources() {
				if k == keyRoleBinding || strings.HasPrefix(k, keyPrefixStatefulSet) {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncomposed (-want +got):\n%s", tc.reason, diff)
			}
			for _, k := range []string{keyServiceAccount, keyRole, "service-0", "relayconfig-1"} {
				if rsp.GetDesired().GetResources()[k] == nil {
					t.Errorf("%s\n%s waits for nothing and must be composed", tc.reason, k)
				}
			}
		})
	}
}
