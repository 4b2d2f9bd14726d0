package crossplane

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

// TestNodePortRelay: on a cluster with no load balancer for UDP, two tailnet
// clients kept off direct paths reach each other through a NodePort relay.
// The path runs to the node's address at the Service's node port, which the
// node forwards to the relay pod, as kube-proxy does. The cluster is its own,
// installed with the README's commands, so this relay is the tailnet's only
// one.
func TestNodePortRelay(t *testing.T) {
	s := start(t, options{})
	ctx := t.Context()
	for _, c := range readmeBlock(t, "## Install on a cluster") {
		if strings.Contains(c.Line, "examples/peerrelay.yaml") {
			break // the README's PeerRelay has load balancers
		}
		s.runReadme(t, c)
	}
	const ns, name = "team-edge", "nodeport-relay"
	s.namespaceWithKey(t, ns)
	if out, err := s.Kubectl(t, "apply", "-f", "examples/nodeport.yaml"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.waitReady(ctx, t, ns, name, 3*time.Minute)
	svc := &corev1.Service{}
	if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, svc); err != nil {
		t.Fatal(err)
	}
	endpoint := netip.AddrPortFrom(s.node.Address(), uint16(svc.Spec.Ports[0].NodePort))
	relay := s.localClient(t, ns, name+"-0-0")
	s.waitRelayPrefs(t, relay, []netip.AddrPort{endpoint})

	// Outside the cluster the pod network is not routed: the clients reach
	// the node, not the relay pod's own address (which tailscaled also
	// advertises).
	pod := &corev1.Pod{}
	if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0-0"}, pod); err != nil {
		t.Fatal(err)
	}
	outside := func(hostname string) *tailnet.Daemon {
		netns, _ := s.node.TestHost(t)
		if out, err := exec.Command("ip", "-n", netns, "route", "add", "unreachable", pod.Status.PodIP+"/32").CombinedOutput(); err != nil {
			t.Fatalf("keeping %s off the pod network: %v: %s", hostname, err, out)
		}
		return s.tailnet.StartClient(t, netns, hostname, "TS_DEBUG_NEVER_DIRECT_UDP=1")
	}
	a := outside("client-a")
	b := outside("client-b")
	tailnet.WaitRunning(t, a.LocalClient, time.Minute)
	bIP := tailnet.WaitRunning(t, b.LocalClient, time.Minute)
	via := tailnet.PingThroughPeerRelay(t, a.LocalClient, bIP, 90*time.Second)
	if !strings.HasPrefix(via, endpoint.String()+":") {
		t.Errorf("the ping went through %s, not the node port %s", via, endpoint)
	}
	harness.Eventually(t, 30*time.Second, "the relay lists the session", func(context.Context) error {
		st, err := relay.DebugPeerRelaySessions(ctx)
		if err != nil {
			return err
		}
		if len(st.Sessions) == 0 {
			return fmt.Errorf("no relay session")
		}
		return nil
	})
}
