package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// WriteKubeconfig writes cfg (server, CA, and client certificate or bearer
// token) as a kubeconfig file in dir and returns its path.
func WriteKubeconfig(t testing.TB, cfg *rest.Config, dir, name string) string {
	t.Helper()
	path, err := WriteKubeconfigFile(cfg, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func WriteKubeconfigFile(cfg *rest.Config, dir, name string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	kc.CurrentContext = "test"
	path := filepath.Join(dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// ServiceAccountConfig creates ServiceAccount ns/name if it is missing and
// returns a client config that authenticates as it with a token from the
// TokenRequest API, as a pod's projected token would: whatever it does is
// authorised by the RBAC bound to that ServiceAccount, nothing more.
func ServiceAccountConfig(ctx context.Context, t testing.TB, admin *rest.Config, ns, name string) *rest.Config {
	t.Helper()
	cfg, err := ServiceAccountRESTConfig(ctx, admin, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func ServiceAccountRESTConfig(ctx context.Context, admin *rest.Config, ns, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{})
	if err != nil && !kerrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("cannot create ServiceAccount %s/%s: %w", ns, name, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot get a token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	return &rest.Config{
		Host:            admin.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData},
		BearerToken:     tr.Status.Token,
		QPS:             admin.QPS,
		Burst:           admin.Burst,
	}, nil
}
