package harness

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// APIServer is a running kube-apiserver + etcd.
type APIServer struct {
	Env    *envtest.Environment
	Config *rest.Config
	// ClusterCA signed the certificate the API server shows a pod that
	// dials https://kubernetes.default.svc: a pod's ca.crt.
	ClusterCA []byte
}

// ServiceCIDR is where Services get their ClusterIPs (IPv4).
var ServiceCIDR = netip.MustParsePrefix("10.0.0.0/16")

// KubernetesServiceIP is the default kubernetes Service's ClusterIP, first
// of the service range below: KUBERNETES_SERVICE_HOST in a pod.
var KubernetesServiceIP = net.IPv4(10, 0, 0, 1)

// StartAPIServer starts kube-apiserver and etcd from the tools folder with
// the CRDs in crdDirs installed, and stops them when the test ends.
func StartAPIServer(t testing.TB, crdDirs ...string) *APIServer {
	t.Helper()
	return StartAPIServerWith(t, APIServerOptions{}, crdDirs...)
}

// APIServerOptions tune StartAPIServerWith.
type APIServerOptions struct {
	// Pods admits pods as a cluster does: the ServiceAccount admission
	// plugin (which envtest turns off) gives each pod its kube-api-access
	// token volume and refuses one whose ServiceAccount does not exist yet.
	Pods bool
	// DualStack gives the cluster IPv4 and IPv6 Service ranges (IPv4
	// first): a Service that prefers dual-stack gets a ClusterIP of each
	// family, and spec.ipFamilies says both.
	DualStack bool
	// RealNode leaves the kubernetes Service's endpoints to a real node
	// (test/harness/node): its kube-proxy sends pods where the node
	// forwards the API server, not to the API server's loopback address.
	RealNode bool
	// AuditLog, if set, is the file kube-apiserver writes an audit event
	// to (JSON lines, metadata only) for every write request but lease
	// renewals: who wrote what, for counting each component's writes.
	AuditLog string
}

// StartAPIServerWith starts kube-apiserver and etcd as StartAPIServer does,
// tuned by o.
func StartAPIServerWith(t testing.TB, o APIServerOptions, crdDirs ...string) *APIServer {
	t.Helper()
	for _, tool := range []string{"kube-apiserver", "etcd", "kubectl"} {
		Tool(t, tool)
	}
	logf.SetLogger(logr.Discard()) // controller-runtime complains until a logger is set
	env := &envtest.Environment{
		BinaryAssetsDirectory:    ToolsDir(t),
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStopTimeout:  60 * time.Second,
		ControlPlaneStartTimeout: 60 * time.Second,
	}
	// Room for thousands of Services (the scale benchmark); envtest's
	// default range is a /24.
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Configure().Set("service-cluster-ip-range", ServiceCIDR.String())
	if o.DualStack {
		apiServer.Configure().Set("service-cluster-ip-range", ServiceCIDR.String()+",fd00:10::/108")
	}
	// Reach a kubelet (a pod's logs) at its node's address: a test node's
	// name is no host name.
	apiServer.Configure().Set("kubelet-preferred-address-types", "InternalIP")
	// Stop in a second, not a minute, while clients still hold watches.
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "1s")
	// A certificate folder of our own survives a restart (RestartAPIServer),
	// so clients keep trusting the server.
	apiServer.CertDir = t.TempDir()
	if o.Pods {
		apiServer.Configure().Disable("disable-admission-plugins")
	}
	if o.RealNode {
		apiServer.Configure().Set("endpoint-reconciler-type", "none")
	}
	if o.AuditLog != "" {
		policy := filepath.Join(apiServer.CertDir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditWrites), 0o600); err != nil {
			t.Fatal(err)
		}
		apiServer.Configure().Set("audit-policy-file", policy)
		apiServer.Configure().Set("audit-log-path", o.AuditLog)
		apiServer.Configure().Set("audit-log-format", "json")
		apiServer.Configure().Set("audit-log-mode", "blocking")
	}
	// A pod dials https://kubernetes.default.svc (containerboot) or
	// https://10.0.0.1 (client-go's in-cluster config, no SNI): the server's
	// own certificate names both, and 127.0.0.1 for the test's clients.
	// envtest uses the certificates it finds in CertDir; the clients it
	// configures trust the CA given here.
	ca, caKey, err := newCA("cluster-ca")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := signCert(ca, caKey,
		[]string{"localhost", "kubernetes.default.svc", "kubernetes.default", "kubernetes", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.IPv4(127, 0, 0, 1), KubernetesServiceIP})
	if err != nil {
		t.Fatal(err)
	}
	// Service account tokens are signed with the cluster CA's key.
	for name, b := range map[string][]byte{"apiserver.crt": svc.Cert, "apiserver.key": svc.Key, "sa-signer.crt": ca, "sa-signer.key": caKey} {
		if err := os.WriteFile(filepath.Join(apiServer.CertDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	apiServer.CA = ca
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cannot start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the API server: %v", err)
		}
	})
	return &APIServer{Env: env, Config: cfg, ClusterCA: ca}
}

// auditWrites is the audit policy of APIServerOptions.AuditLog: metadata
// of every write once it is answered, nothing of reads, watches or leases.
const auditWrites = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: None
  verbs: [get, list, watch]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: Metadata
`

// RestartAPIServer stops kube-apiserver, waits, and starts it again on the
// same address with the same certificates; etcd and its data stay.
func (a *APIServer) RestartAPIServer(t testing.TB, down time.Duration) {
	t.Helper()
	s := a.Env.ControlPlane.GetAPIServer()
	if err := s.Stop(); err != nil {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	time.Sleep(down)
	if err := s.Start(); err != nil {
		t.Fatalf("starting kube-apiserver again: %v", err)
	}
}

// ClientIn returns a client of the API server's and creates namespace ns,
// where a test writes its objects.
func (a *APIServer) ClientIn(t testing.TB, ns string) client.Client {
	t.Helper()
	c, err := client.New(a.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return c
}
