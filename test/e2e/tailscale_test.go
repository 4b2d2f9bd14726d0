// Package e2e proves the config the provider writes against real Tailscale
// parts: tailscaled built from tailscale.com v1.102.5, a testcontrol control
// server, and DERP and STUN from tstest/integration, all on loopback.
package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"tailscale.com/ipn"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

// world is the tailnet on loopback and the provider running against an
// API server, configured to use its control server.
type world struct {
	*tailnet.Tailnet
	provider *providertest.Env
}

func startWorld(t testing.TB) *world {
	t.Helper()
	return startWorldWith(t, v1alpha1.ProviderConfigSpec{})
}

// startWorldWith starts the world with spec as the provider config, its
// control URL set to the tailnet's.
func startWorldWith(t testing.TB, spec v1alpha1.ProviderConfigSpec) *world {
	t.Helper()
	tn := tailnet.Start(t, "127.0.0.1")
	spec.ControlURL = tn.URL
	pe := providertest.Start(t, providertest.Options{ProviderConfig: spec})
	return &world{Tailnet: tn, provider: pe}
}

// addRelay creates Service relay-0 with ingressIP and RelayConfig relay-0
// on a free UDP port, with the auth key as the pod would see it: a file
// from the mounted Secret. It returns the port.
func (w *world) addRelay(t testing.TB, ingressIP string) uint16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pe := w.provider
	keyDir := t.TempDir()
	// Readable by the unprivileged user of TestTailscaledRunsAsNonRoot, as
	// a Secret volume is by the pod's user.
	must(t, os.Chmod(keyDir, 0o755))
	must(t, os.WriteFile(filepath.Join(keyDir, "authkey"), []byte("tskey-auth-test"), 0o644))
	port := freeUDPPort(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "relay-0", Namespace: pe.NS},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: int32(port)}}},
	}
	must(t, pe.Client.Create(ctx, svc))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingressIP}}
	must(t, pe.Client.Status().Update(ctx, svc))
	must(t, pe.Client.Create(ctx, &v1alpha1.RelayConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "relay-0", Namespace: pe.NS},
		Spec: v1alpha1.RelayConfigSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
			ForProvider: v1alpha1.RelayConfigParameters{
				ServiceRef: &v1alpha1.LocalRef{Name: "relay-0"}, ConfigSecretName: "relay-0-config",
				Hostname: "relay-0", Port: int32(port),
				AuthKeySecretRef: &v1alpha1.AuthKeyRef{Name: "tailscale-auth", Key: "authkey", Mode: v1alpha1.AuthKeyModeFile, MountPath: keyDir},
			},
		},
	}))
	return port
}

// runRelay adds relay-0 with ingressIP, waits for its config to advertise
// ingressIP on its port, and runs tailscaled with that config until it is
// logged in. It returns the port and the relay.
func (w *world) runRelay(t testing.TB, ingressIP string) (uint16, *tailnet.Daemon) {
	t.Helper()
	port := w.addRelay(t, ingressIP)
	cfgFile := filepath.Join(t.TempDir(), tsconfig.FileName)
	waitForConfig(t, w.provider, cfgFile, []string{fmt.Sprintf("%s:%d", ingressIP, port)})
	relay := w.startTailscaled(t, cfgFile, nil)
	tailnet.WaitRunning(t, relay.LocalClient, time.Minute)
	return port, relay
}

// freeUDPPort returns a UDP port free on the host now: the relay binds a
// real port even in userspace networking.
func freeUDPPort(t testing.TB) uint16 {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// startTailscaled runs tailscaled with configFile, logging in to w's
// control server, as user (nil: this process's).
func (w *world) startTailscaled(t testing.TB, configFile string, user *syscall.Credential) *tailnet.Daemon {
	t.Helper()
	return tailnet.StartDaemon(t, tailnet.DaemonOptions{ConfigFile: configFile, ControlURL: w.URL, User: user})
}

// TestRealTailscaledRunsOurConfig: the provider resolves a Service's
// ingress and writes the config Secret; tailscaled started with that file
// runs, is a peer relay on our port and advertises our endpoints; after the
// ingress changes, the rewritten file reloaded in place (as containerboot
// does) changes the live endpoints without a restart.
func TestRealTailscaledRunsOurConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	w := startWorld(t)
	control, pe, c := w.Control, w.provider, w.provider.Client
	port := w.addRelay(t, "203.0.113.7")
	svc := &corev1.Service{}

	// What the kubelet does with the Secret volume: the key becomes a file.
	cfgFile := filepath.Join(t.TempDir(), tsconfig.FileName)
	first := waitForConfig(t, pe, cfgFile, []string{fmt.Sprintf("203.0.113.7:%d", port)})

	ts := w.startTailscaled(t, cfgFile, nil)
	var nodeKeyStatus string
	harness.Eventually(t, time.Minute, "tailscaled reaches Running", func(ctx context.Context) error {
		st, err := ts.LocalClient.Status(ctx)
		if err != nil {
			return err
		}
		if st.BackendState != ipn.Running.String() {
			return fmt.Errorf("backend state %s", st.BackendState)
		}
		nodeKeyStatus = st.Self.PublicKey.String()
		return nil
	})
	assertPrefs(t, ts, port, first)
	harness.Eventually(t, time.Minute, "control sees Hostinfo.PeerRelay", func(ctx context.Context) error {
		st, err := ts.LocalClient.Status(ctx)
		if err != nil {
			return err
		}
		n := control.Node(st.Self.PublicKey)
		if n == nil || !n.Hostinfo.PeerRelay() {
			return fmt.Errorf("node %v: not a peer relay yet", st.Self.PublicKey)
		}
		if n.Hostinfo.Hostname() != "relay-0" {
			return fmt.Errorf("hostname %q, want relay-0", n.Hostinfo.Hostname())
		}
		return nil
	})

	// The NLB is replaced: new addresses. The provider rewrites the Secret.
	must(t, c.Get(ctx, types.NamespacedName{Namespace: pe.NS, Name: "relay-0"}, svc))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}, {IP: "198.51.100.4"}}
	must(t, c.Status().Update(ctx, svc))
	second := waitForConfig(t, pe, cfgFile, []string{fmt.Sprintf("198.51.100.4:%d", port), fmt.Sprintf("203.0.113.9:%d", port)})
	ok, err := ts.LocalClient.ReloadConfig(ctx)
	if err != nil || !ok {
		t.Fatalf("ReloadConfig: ok=%v err=%v", ok, err)
	}
	assertPrefs(t, ts, port, second)
	st, err := ts.LocalClient.Status(ctx)
	must(t, err)
	if st.Self.PublicKey.String() != nodeKeyStatus {
		t.Errorf("node key changed across the reload: %s -> %s", nodeKeyStatus, st.Self.PublicKey)
	}
	if ts.Exited() {
		t.Error("tailscaled exited; the reload should be live")
	}
}

// waitForConfig waits until the config Secret advertises want, writes its
// file where tailscaled reads it, and returns the endpoints.
func waitForConfig(t testing.TB, pe *providertest.Env, file string, want []string) []netip.AddrPort {
	t.Helper()
	var eps []netip.AddrPort
	harness.Eventually(t, time.Minute, fmt.Sprintf("config Secret advertises %v", want), func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := pe.Client.Get(ctx, types.NamespacedName{Namespace: pe.NS, Name: "relay-0-config"}, s); err != nil {
			return err
		}
		b := s.Data[tsconfig.FileName]
		var got []string
		cfg, err := parse(b)
		if err != nil {
			return err
		}
		for _, e := range cfg.RelayServerStaticEndpoints {
			got = append(got, e.String())
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("endpoints %v", got)
		}
		eps = cfg.RelayServerStaticEndpoints
		return os.WriteFile(file, b, 0o600)
	})
	return eps
}

func assertPrefs(t *testing.T, ts *tailnet.Daemon, port uint16, eps []netip.AddrPort) {
	t.Helper()
	harness.Eventually(t, time.Minute, "prefs carry our relay settings", func(ctx context.Context) error {
		p, err := ts.LocalClient.GetPrefs(ctx)
		if err != nil {
			return err
		}
		if p.RelayServerPort == nil || *p.RelayServerPort != port {
			return fmt.Errorf("RelayServerPort %v, want %d", p.RelayServerPort, port)
		}
		if !slices.Equal(p.RelayServerStaticEndpoints, eps) {
			return fmt.Errorf("RelayServerStaticEndpoints %v, want %v", p.RelayServerStaticEndpoints, eps)
		}
		if p.CorpDNS {
			return fmt.Errorf("CorpDNS (AcceptDNS) is on; the config says false")
		}
		return nil
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
