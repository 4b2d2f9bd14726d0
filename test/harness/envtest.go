package harness

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
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

// KubernetesServiceIP is the default kubernetes Service's ClusterIP, first
// of the service range below: KUBERNETES_SERVICE_HOST in a pod.
var KubernetesServiceIP = net.IPv4(10, 0, 0, 1)

// StartAPIServer starts kube-apiserver and etcd from the tools folder with
// the CRDs in crdDirs installed, and stops them when the test ends.
func StartAPIServer(t testing.TB, crdDirs ...string) *APIServer {
	t.Helper()
	return startAPIServer(t, false, crdDirs...)
}

// startAPIServer with pods admits pods as a cluster does: the
// ServiceAccount admission plugin (which envtest turns off) gives each pod
// its kube-api-access token volume and refuses one whose ServiceAccount
// does not exist yet.
func startAPIServer(t testing.TB, pods bool, crdDirs ...string) *APIServer {
	t.Helper()
	for _, tool := range []string{"kube-apiserver", "etcd", "kubectl"} {
		Tool(t, tool)
	}
	logf.SetLogger(logr.Discard()) // controller-runtime complains until a logger is set
	env := &envtest.Environment{
		BinaryAssetsDirectory:    ToolsDir(t),
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStopTimeout:  defaultStopTimeout,
		ControlPlaneStartTimeout: defaultStartTimeout,
	}
	// Room for thousands of Services (the scale benchmark); envtest's
	// default range is a /24.
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	// Stop in a second, not a minute, while clients still hold watches.
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "1s")
	// A certificate folder of our own survives a restart (RestartAPIServer),
	// so clients keep trusting the server.
	apiServer.CertDir = t.TempDir()
	if pods {
		apiServer.Configure().Disable("disable-admission-plugins")
	}
	// What a pod dials is https://kubernetes.default.svc, which envtest's own
	// certificate does not name: the server shows this one to such a client.
	ca, caKey, err := newCA("cluster-ca")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := signCert(ca, caKey, []string{"kubernetes.default.svc", "kubernetes.default", "kubernetes", "kubernetes.default.svc.cluster.local"}, []net.IP{KubernetesServiceIP})
	if err != nil {
		t.Fatal(err)
	}
	crt, key := filepath.Join(apiServer.CertDir, "in-cluster.crt"), filepath.Join(apiServer.CertDir, "in-cluster.key")
	if err := os.WriteFile(crt, svc.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, svc.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	apiServer.Configure().Append("tls-sni-cert-key", crt+","+key)
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
