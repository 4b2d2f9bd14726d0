package relayconfig

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			reason: "The RelayConfig naming the Service is reconciled.",
			want:   1,
		},
		"ListFails": {
			reason:  "A failed List enqueues nothing and says so, with the Service and the error.",
			list:    errors.New("cache not started"),
			wantLog: `"service"="relay-0" "error"="cache not started"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logged strings.Builder
			log := logging.NewLogrLogger(funcr.New(func(prefix, args string) { logged.WriteString(args + "\n") }, funcr.Options{}))
			kube := &test.MockClient{MockList: func(_ context.Context, l client.ObjectList, _ ...client.ListOption) error {
				if tc.list != nil {
					return tc.list
				}
				l.(*v1alpha1.RelayConfigList).Items = []v1alpha1.RelayConfig{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "relay-0"}}}
				return nil
			}}
			reqs := relayConfigsFor(kube, log)(t.Context(), svc)
			if len(reqs) != tc.want {
				t.Errorf("%s\nrequests: %v, want %d", tc.reason, reqs, tc.want)
			}
			if !strings.Contains(logged.String(), tc.wantLog) {
				t.Errorf("%s\nlog %q, want it to contain %q", tc.reason, logged.String(), tc.wantLog)
			}
		})
	}
}
