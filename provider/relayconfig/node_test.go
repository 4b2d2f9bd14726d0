package relayconfig

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/endpoint"
)

func TestNodeEndpoints(t *testing.T) {
	type want struct {
		endpoints []string
		source    v1alpha1.EndpointSource
		err       string
	}
	addrs := func(a ...corev1.NodeAddress) []corev1.NodeAddress { return a }
	cases := map[string]struct {
		reason   string
		mode     v1alpha1.NodeMode
		static   []string
		svc      *corev1.Service
		nodeName string // the pod's; "" unscheduled
		noPod    bool
		nodeErr  error
		node     []corev1.NodeAddress
		want     want
	}{
		"HostPortExternal": {
			reason:   "A host-port relay is advertised on its node's ExternalIP addresses, both families, on the relay's port; InternalIP ones are left out.",
			mode:     v1alpha1.NodeModeHostPort,
			nodeName: "node-a",
			node: addrs(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.5"},
				corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "2001:db8::5"}, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-a"}),
			want: want{endpoints: []string{"198.51.100.5:41641", "[2001:db8::5]:41641"}, source: v1alpha1.SourceNodeExternalIP},
		},
		"NodePortInternal": {
			reason:   "A NodePort relay is advertised on the Service's node port; a node without an ExternalIP gives its InternalIP, and the source says so.",
			mode:     v1alpha1.NodeModeNodePort,
			svc:      &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 41641, NodePort: 30641}}}},
			nodeName: "node-a",
			node:     addrs(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}),
			want:     want{endpoints: []string{"10.0.0.5:30641"}, source: v1alpha1.SourceNodeInternalIP},
		},
		"StaticPortWinsOnTheNode": {
			reason:   "A port forward to the node's own address (its static entry) wins for that address.",
			mode:     v1alpha1.NodeModeHostPort,
			static:   []string{"10.0.0.5:6969"},
			nodeName: "node-a",
			node:     addrs(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}),
			want:     want{endpoints: []string{"10.0.0.5:6969"}, source: v1alpha1.SourceNodeInternalIP},
		},
		"NodePortNotAllocated": {
			reason: "No node port yet: pending, not an error.",
			mode:   v1alpha1.NodeModeNodePort,
			svc:    &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 41641}}}},
			want:   want{endpoints: []string{}},
		},
		"Unscheduled": {
			reason: "A pod on no node yet: pending.",
			mode:   v1alpha1.NodeModeHostPort,
			want:   want{endpoints: []string{}},
		},
		"NoPodYetStaticOnly": {
			reason: "No pod yet: the static endpoints alone.",
			mode:   v1alpha1.NodeModeHostPort,
			static: []string{"198.51.100.30:41641"},
			noPod:  true,
			want:   want{endpoints: []string{"198.51.100.30:41641"}, source: v1alpha1.SourceStatic},
		},
		"NodeUnreadable": {
			reason:   "A node the provider cannot read is an error naming it, so the last good endpoints stay.",
			mode:     v1alpha1.NodeModeHostPort,
			nodeName: "node-a",
			nodeErr:  errors.New("nodes \"node-a\" is forbidden"),
			want:     want{err: "cannot get node node-a of pod my-relay-0-0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			read := &test.MockClient{MockGet: func(_ context.Context, key client.ObjectKey, obj client.Object) error {
				switch o := obj.(type) {
				case *corev1.Pod:
					if tc.noPod || key != (client.ObjectKey{Namespace: "team-a", Name: "my-relay-0-0"}) {
						return kerrors.NewNotFound(schema.GroupResource{Resource: "pods"}, key.Name)
					}
					o.Spec.NodeName = tc.nodeName
				case *corev1.Node:
					if tc.nodeErr != nil {
						return tc.nodeErr
					}
					if key.Name != tc.nodeName {
						return kerrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, key.Name)
					}
					o.Status.Addresses = tc.node
				}
				return nil
			}}
			e := &external{read: read}
			mg := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Name: "my-relay-0", Namespace: "team-a"}}
			mg.Spec.ForProvider.Port = 41641
			mg.Spec.ForProvider.StaticEndpoints = tc.static
			mg.Spec.ForProvider.Node = &v1alpha1.NodeEndpoint{Pod: "my-relay-0-0", Mode: tc.mode}
			res, err := e.nodeEndpoints(context.Background(), mg, tc.svc)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nwant an error containing %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.endpoints, endpoint.Strings(res.Endpoints)); diff != "" || res.Source != tc.want.source {
				t.Errorf("%s\nendpoints (-want +got):\n%s\nsource %q, want %q", tc.reason, diff, res.Source, tc.want.source)
			}
		})
	}
}

func TestNodePollInterval(t *testing.T) {
	mg := &v1alpha1.RelayConfig{}
	if got := nodePollInterval(mg, 10*time.Minute); got != 10*time.Minute {
		t.Errorf("a load-balanced relay: poll %v, want its own 10m", got)
	}
	mg.Spec.ForProvider.Node = &v1alpha1.NodeEndpoint{Pod: "p", Mode: v1alpha1.NodeModeHostPort}
	if got := nodePollInterval(mg, 10*time.Minute); got != nodePoll {
		t.Errorf("a relay on its node: poll %v, want %v (a rescheduled pod is advertised within it)", got, nodePoll)
	}
	if got := nodePollInterval(mg, 30*time.Second); got != 30*time.Second {
		t.Errorf("a shorter poll stays: %v", got)
	}
}
