package relayconfig

import (
	"net/netip"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

func TestServedByKubeProxy(t *testing.T) {
	lb := func(ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}}}
	}
	cases := map[string]struct {
		reason string
		svc    *corev1.Service
		want   []netip.Addr
	}{
		"NoService": {reason: "A replica without a Service (static or node endpoints) has none.", svc: nil},
		"NoIPMode": {
			reason: "An IP without ipMode (MetalLB) is served by kube-proxy, IPv6 too.",
			svc:    lb(corev1.LoadBalancerIngress{IP: "203.0.113.10"}, corev1.LoadBalancerIngress{IP: "2001:db8::10"}),
			want:   []netip.Addr{netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8::10")},
		},
		"VIP": {
			reason: "ipMode VIP is served by kube-proxy.",
			svc:    lb(corev1.LoadBalancerIngress{IP: "203.0.113.10", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}),
			want:   []netip.Addr{netip.MustParseAddr("203.0.113.10")},
		},
		"Proxy": {
			reason: "ipMode Proxy sends pods' traffic to the load balancer.",
			svc:    lb(corev1.LoadBalancerIngress{IP: "203.0.113.10", IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)}),
		},
		"Hostname": {
			reason: "An NLB named by a hostname is crossed.",
			svc:    lb(corev1.LoadBalancerIngress{Hostname: "k8s-relay.elb.us-east-1.amazonaws.com"}),
		},
		"NodePort": {
			reason: "A NodePort Service has no load balancer address.",
			svc:    &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, servedByKubeProxy(tc.svc), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("%s\nservedByKubeProxy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestProbeCondition(t *testing.T) {
	a, b := netip.MustParseAddrPort("203.0.113.10:41641"), netip.MustParseAddrPort("198.51.100.7:41641")
	vip := []netip.Addr{a.Addr()}
	cases := map[string]struct {
		reason               string
		answered, silent     []netip.AddrPort
		viaKubeProxy         []netip.Addr
		wantStatus           corev1.ConditionStatus
		wantReason           xpv2.ConditionReason
		wantNote, wantNoNote bool
	}{
		"AnsweredCrossed": {
			reason:   "An answer through a load balancer that is crossed says nothing more.",
			answered: []netip.AddrPort{a, b}, wantStatus: corev1.ConditionTrue, wantReason: v1alpha1.ReasonAnswered, wantNoNote: true,
		},
		"AnsweredInCluster": {
			reason:   "An answer through a VIP address says it did not cross the load balancer.",
			answered: []netip.AddrPort{a, b}, viaKubeProxy: vip, wantStatus: corev1.ConditionTrue, wantReason: v1alpha1.ReasonAnswered, wantNote: true,
		},
		"PartlyInCluster": {
			reason:   "A partial answer names the in-cluster answer too.",
			answered: []netip.AddrPort{a}, silent: []netip.AddrPort{b}, viaKubeProxy: vip,
			wantStatus: corev1.ConditionTrue, wantReason: v1alpha1.ReasonPartlyAnswered, wantNote: true,
		},
		"SilentVIP": {
			reason: "No answer even through kube-proxy: the relay or its Service is at fault, nothing to qualify.",
			silent: []netip.AddrPort{a}, viaKubeProxy: vip, wantStatus: corev1.ConditionFalse, wantReason: v1alpha1.ReasonNoAnswer, wantNoNote: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := probeCondition(tc.answered, tc.silent, tc.viaKubeProxy)
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Errorf("%s\nprobeCondition: %s %s, want %s %s", tc.reason, c.Status, c.Reason, tc.wantStatus, tc.wantReason)
			}
			note := strings.Contains(c.Message, a.String()+" answered from inside the cluster")
			if (tc.wantNote && !note) || (tc.wantNoNote && note) {
				t.Errorf("%s\nmessage %q: in-cluster note %t, want %t", tc.reason, c.Message, note, tc.wantNote)
			}
			if strings.Contains(c.Message, b.String()+" answered from inside") {
				t.Errorf("%s\nmessage %q names %s, which kube-proxy does not serve", tc.reason, c.Message, b)
			}
		})
	}
}
