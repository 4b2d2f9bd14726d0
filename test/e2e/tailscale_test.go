// Package e2e proves the config the provider writes against real Tailscale
// parts: tailscaled built from tailscale.com v1.102.5, a testcontrol control
// server, and DERP and STUN from tstest/integration, all on loopback.
package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"tailscale.com/client/local"
	"tailscale.com/ipn"
	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// tailnet is a control server with DERP and STUN on loopback, and the
// provider running against an API server, configured to use that control
// server.
type tailnet struct {
	control  *testcontrol.Server
	server   *httptest.Server
	provider *providertest.Env
}

func startTailnet(t *testing.T) *tailnet {
	t.Helper()
	derpMap := integration.RunDERPAndSTUN(t, t.Logf, "127.0.0.1")
	control := &testcontrol.Server{DERPMap: derpMap, PeerRelayGrants: true, AllOnline: true, Logf: func(string, ...any) {}}
	srv := httptest.NewServer(control)
	t.Cleanup(srv.Close)
	pe := providertest.Start(t, providertest.Options{ProviderConfig: v1alpha1.ProviderConfigSpec{ControlURL: srv.URL}})
	return &tailnet{control: control, server: srv, provider: pe}
}

// addRelay creates Service relay-0 with ingressIP and RelayConfig relay-0
// on a free UDP port, with the auth key as the pod would see it: a file
// from the mounted Secret. It returns the port.
func (tn *tailnet) addRelay(t *testing.T, ingressIP string) uint16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pe := tn.provider
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

// freeUDPPort returns a UDP port free on the host now: the relay binds a
// real port even in userspace networking.
func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

type tailscaled struct {
	cmd *exec.Cmd
	lc  *local.Client
	log *harness.SyncBuffer
}

// startTailscaled runs tailscaled in userspace networking with --config.
func startTailscaled(t *testing.T, bin, controlURL, configFile string) *tailscaled {
	t.Helper()
	return startTailscaledAs(t, bin, controlURL, configFile, nil)
}

// startTailscaledAs runs tailscaled as the given user (nil: this one).
func startTailscaledAs(t *testing.T, bin, controlURL, configFile string, user *syscall.Credential) *tailscaled {
	t.Helper()
	dir := t.TempDir()
	if user != nil {
		// The state folder must be the user's, as an emptyDir is the pod's.
		must(t, os.Chown(dir, int(user.Uid), int(user.Gid)))
		must(t, os.Chmod(filepath.Dir(dir), 0o755))
	}
	sock := filepath.Join(dir, "ts.sock")
	cmd := exec.Command(bin, "--tun=userspace-networking", "--statedir="+dir, "--socket="+sock, "--port=0", "--config="+configFile)
	if user != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: user}
	}
	cmd.Env = append(os.Environ(),
		"TS_DISABLE_PORTMAPPER=1", "TS_NO_LOGS_NO_SUPPORT=true", "TS_LOGS_DIR="+dir,
		"TS_ASSUME_NETWORK_UP_FOR_TEST=1", "TS_NETCHECK_GENERATE_204_URL="+controlURL+"/generate_204")
	log := &harness.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("tailscaled log:\n%s", log.String())
		}
	})
	return &tailscaled{cmd: cmd, lc: &local.Client{Socket: sock, UseSocketOnly: true}, log: log}
}

// TestRealTailscaledRunsOurConfig: the provider resolves a Service's
// ingress and writes the config Secret; tailscaled started with that file
// runs, is a peer relay on our port and advertises our endpoints; after the
// ingress changes, the rewritten file reloaded in place (as containerboot
// does) changes the live endpoints without a restart.
func TestRealTailscaledRunsOurConfig(t *testing.T) {
	bin := harness.Tool(t, "tailscaled")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	tn := startTailnet(t)
	control, controlSrv, pe, c := tn.control, tn.server, tn.provider, tn.provider.Client
	port := tn.addRelay(t, "203.0.113.7")
	svc := &corev1.Service{}

	// What the kubelet does with the Secret volume: the key becomes a file.
	cfgFile := filepath.Join(t.TempDir(), tsconfig.FileName)
	first := waitForConfig(t, pe, cfgFile, []string{fmt.Sprintf("203.0.113.7:%d", port)})

	ts := startTailscaled(t, bin, controlSrv.URL, cfgFile)
	var nodeKeyStatus string
	harness.Eventually(t, time.Minute, "tailscaled reaches Running", func(ctx context.Context) error {
		st, err := ts.lc.Status(ctx)
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
		st, err := ts.lc.Status(ctx)
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
	ok, err := ts.lc.ReloadConfig(ctx)
	if err != nil || !ok {
		t.Fatalf("ReloadConfig: ok=%v err=%v", ok, err)
	}
	assertPrefs(t, ts, port, second)
	st, err := ts.lc.Status(ctx)
	must(t, err)
	if st.Self.PublicKey.String() != nodeKeyStatus {
		t.Errorf("node key changed across the reload: %s -> %s", nodeKeyStatus, st.Self.PublicKey)
	}
	if ts.cmd.ProcessState != nil {
		t.Error("tailscaled exited; the reload should be live")
	}
}

// waitForConfig waits until the config Secret advertises want, writes its
// file where tailscaled reads it, and returns the endpoints.
func waitForConfig(t *testing.T, pe *providertest.Env, file string, want []string) []netip.AddrPort {
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

func assertPrefs(t *testing.T, ts *tailscaled, port uint16, eps []netip.AddrPort) {
	t.Helper()
	harness.Eventually(t, time.Minute, "prefs carry our relay settings", func(ctx context.Context) error {
		p, err := ts.lc.GetPrefs(ctx)
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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
