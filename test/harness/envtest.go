package harness

import (
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
}

// StartAPIServer starts kube-apiserver and etcd from the tools folder with
// the CRDs in crdDirs installed, and stops them when the test ends.
func StartAPIServer(t testing.TB, crdDirs ...string) *APIServer {
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
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cannot start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the API server: %v", err)
		}
	})
	return &APIServer{Env: env, Config: cfg}
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
