package relayconfig

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// TestRelayConfigsFor: a Service event reaches the RelayConfigs that name
// it; a failed List is said in the log, not dropped in silence.
func TestRelayConfigsFor(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "relay-0"}}
	cases := map[string]struct {
		reason  string
		list    error
		want    int
		wantLog string
	}{
		"Found": {
			reason: "The RelayConfig naming the Service is reconciled, and only that one.",
			want:   1,
		},
		"ListFails": {
			reason:  "A failed List enqueues nothing and says so, with the Service and the error.",
			list:    errors.New("cache not started"),
			wantLog: `"index"="spec.forProvider.serviceRef.name" "value"="relay-0" "error"="cache not started"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logged strings.Builder
			log := logging.NewLogrLogger(funcr.New(func(prefix, args string) { logged.WriteString(args + "\n") }, funcr.Options{}))
			kube := fake.NewClientBuilder().WithScheme(testScheme()).
				WithIndex(&v1alpha1.RelayConfig{}, serviceIndex, serviceRefName).
				WithObjects(
					relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Name, rc.Spec.ForProvider.ServiceRef.Name = "relay-0", "relay-0" }),
					relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Name, rc.Spec.ForProvider.ServiceRef.Name = "relay-1", "relay-1" }),
				).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					if tc.list != nil {
						return tc.list
					}
					return c.List(ctx, l, opts...)
				}}).Build()
			reqs := relayConfigsFor(kube, log)(t.Context(), svc)
			if len(reqs) != tc.want || (tc.want == 1 && reqs[0].Name != "relay-0") {
				t.Errorf("%s\nrequests: %v, want %d", tc.reason, reqs, tc.want)
			}
			if !strings.Contains(logged.String(), tc.wantLog) {
				t.Errorf("%s\nlog %q, want it to contain %q", tc.reason, logged.String(), tc.wantLog)
			}
		})
	}
}
