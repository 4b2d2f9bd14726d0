package kubelet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/peerrelay/peerrelay/test/harness"
)

// errWaiting: the pod cannot start yet (a Secret it needs does not exist);
// a kubelet keeps it in ContainerCreating and tries again.
var errWaiting = errors.New("waiting")

// volumeFiles returns the files volume v holds for pod p now, as a kubelet
// would project them: Secret and ConfigMap keys, emptyDir (nil), the
// projected kube-api-access token, CA and namespace.
func (n *Node) volumeFiles(ctx context.Context, p *corev1.Pod, v corev1.Volume) (map[string][]byte, error) {
	switch {
	case v.EmptyDir != nil:
		return nil, nil
	case v.Secret != nil:
		return n.secretFiles(ctx, p.Namespace, v.Secret.SecretName, v.Secret.Items, ptr.Deref(v.Secret.Optional, false))
	case v.ConfigMap != nil:
		return n.configMapFiles(ctx, p.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, ptr.Deref(v.ConfigMap.Optional, false))
	case v.Projected != nil:
		files := map[string][]byte{}
		for _, s := range v.Projected.Sources {
			var part map[string][]byte
			var err error
			switch {
			case s.ServiceAccountToken != nil:
				part, err = n.tokenFile(ctx, p, s.ServiceAccountToken)
			case s.ConfigMap != nil:
				part, err = n.configMapFiles(ctx, p.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, ptr.Deref(s.ConfigMap.Optional, false))
			case s.Secret != nil:
				part, err = n.secretFiles(ctx, p.Namespace, s.Secret.Name, s.Secret.Items, ptr.Deref(s.Secret.Optional, false))
			case s.DownwardAPI != nil:
				part = map[string][]byte{}
				for _, f := range s.DownwardAPI.Items {
					if f.FieldRef == nil {
						return nil, fmt.Errorf("volume %s: only fieldRef downward API items are supported", v.Name)
					}
					val, err := fieldValue(p, f.FieldRef.FieldPath)
					if err != nil {
						return nil, err
					}
					part[f.Path] = []byte(val)
				}
			default:
				return nil, fmt.Errorf("volume %s: unsupported projected source", v.Name)
			}
			if err != nil {
				return nil, err
			}
			maps.Copy(files, part)
		}
		return files, nil
	}
	return nil, fmt.Errorf("volume %s: the test node supports secret, configMap, projected and emptyDir volumes", v.Name)
}

func (n *Node) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional bool) (map[string][]byte, error) {
	s := &corev1.Secret{}
	if err := n.admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		if kerrors.IsNotFound(err) {
			if optional {
				return map[string][]byte{}, nil
			}
			return nil, fmt.Errorf("%w for Secret %s", errWaiting, name)
		}
		return nil, err
	}
	return project(s.Data, items, optional)
}

func (n *Node) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional bool) (map[string][]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := n.admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
		if kerrors.IsNotFound(err) {
			if optional {
				return map[string][]byte{}, nil
			}
			return nil, fmt.Errorf("%w for ConfigMap %s", errWaiting, name)
		}
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return project(data, items, optional)
}

// project applies a volume's items: only the keys named, at their paths.
func project(data map[string][]byte, items []corev1.KeyToPath, optional bool) (map[string][]byte, error) {
	if len(items) == 0 {
		return maps.Clone(data), nil
	}
	out := map[string][]byte{}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%w for key %s", errWaiting, it.Key)
		}
		out[it.Path] = b
	}
	return out, nil
}

// tokenFile asks the TokenRequest API for the pod's ServiceAccount, bound
// to the pod, as the kubelet does for a projected token.
func (n *Node) tokenFile(ctx context.Context, p *corev1.Pod, s *corev1.ServiceAccountTokenProjection) (map[string][]byte, error) {
	var aud []string
	if s.Audience != "" {
		aud = []string{s.Audience}
	}
	tr, err := n.cs.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{
			Audiences:         aud,
			ExpirationSeconds: s.ExpirationSeconds,
			BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return map[string][]byte{s.Path: []byte(tr.Status.Token)}, nil
}

// writeAtomic lays files out in dir as the kubelet's atomic writer does:
// the data in a timestamped folder, `..data` a symlink to it, each file a
// symlink through `..data`. A new version is swapped in with one rename,
// which is what containerboot's file watch sees. It reports whether
// anything changed.
func writeAtomic(dir string, files map[string][]byte, mode os.FileMode) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	dataLink := filepath.Join(dir, "..data")
	if old, err := os.Readlink(dataLink); err == nil && sameFiles(filepath.Join(dir, old), files) {
		return false, nil
	}
	ts := "..data-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	tsDir := filepath.Join(dir, ts)
	if err := os.MkdirAll(tsDir, 0o755); err != nil {
		return false, err
	}
	for name, b := range files {
		f := filepath.Join(tsDir, name)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(f, b, mode); err != nil {
			return false, err
		}
	}
	old, _ := os.Readlink(dataLink)
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dataLink); err != nil {
		return false, err
	}
	for name := range files {
		top := strings.Split(name, "/")[0]
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", top), link); err != nil {
				return false, err
			}
		}
	}
	// Keys that are gone lose their links.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(files)), func(k string) bool { return strings.Split(k, "/")[0] == e.Name() }) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return true, nil
}

func sameFiles(dir string, files map[string][]byte) bool {
	count := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		want, ok := files[rel]
		if !ok || string(want) != string(b) {
			return errors.New("differs")
		}
		count++
		return nil
	})
	return err == nil && count == len(files)
}

// fieldValue resolves a downward API field path.
func fieldValue(p *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return p.Status.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return p.Status.HostIP, nil
	}
	for _, m := range []struct {
		prefix string
		from   map[string]string
	}{{"metadata.labels['", p.Labels}, {"metadata.annotations['", p.Annotations}} {
		if k, ok := strings.CutPrefix(path, m.prefix); ok {
			return m.from[strings.TrimSuffix(k, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// containerEnv is what the kubelet gives a container: the image's env,
// the kubernetes Service and, unless enableServiceLinks is false, every
// Service of the namespace as docker-link variables, then the container's
// own env with fieldRefs resolved and $(VAR) expanded.
func (n *Node) containerEnv(ctx context.Context, p *corev1.Pod, c *corev1.Container, image *v1.Config) ([]string, error) {
	var names []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			names = append(names, k)
		}
		vals[k] = v
	}
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	if image != nil {
		for _, kv := range image.Env {
			if k, v, ok := strings.Cut(kv, "="); ok {
				set(k, v)
			}
		}
	}
	if ptr.Deref(p.Spec.EnableServiceLinks, true) {
		svcs := &corev1.ServiceList{}
		if err := n.admin.List(ctx, svcs, client.InNamespace(p.Namespace)); err != nil {
			return nil, err
		}
		for _, s := range svcs.Items {
			if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
				continue
			}
			for k, v := range serviceLinkEnv(&s) {
				set(k, v)
			}
		}
	}
	set("KUBERNETES_SERVICE_HOST", harness.KubernetesServiceIP.String())
	set("KUBERNETES_SERVICE_PORT", "443")
	set("KUBERNETES_SERVICE_PORT_HTTPS", "443")
	set("KUBERNETES_PORT", "tcp://"+harness.KubernetesServiceIP.String()+":443")
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
			v = expand(v, vals)
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = fieldValue(p, e.ValueFrom.FieldRef.FieldPath); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			var err error
			if v, err = resourceValue(c, e.ValueFrom.ResourceFieldRef); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			files, err := n.secretFiles(ctx, p.Namespace, e.ValueFrom.SecretKeyRef.Name, nil, ptr.Deref(e.ValueFrom.SecretKeyRef.Optional, false))
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			v = string(files[e.ValueFrom.SecretKeyRef.Key])
		default:
			return nil, fmt.Errorf("env %s: unsupported valueFrom", e.Name)
		}
		set(e.Name, v)
	}
	env := make([]string, len(names))
	for i, k := range names {
		env[i] = k + "=" + vals[k]
	}
	return env, nil
}

// serviceLinkEnv is the docker-link style set the kubelet injects for a
// Service: FOO_SERVICE_HOST, FOO_SERVICE_PORT, FOO_PORT, FOO_PORT_53_UDP….
func serviceLinkEnv(s *corev1.Service) map[string]string {
	name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	ip := s.Spec.ClusterIP
	first := s.Spec.Ports[0]
	env := map[string]string{
		name + "_SERVICE_HOST": ip,
		name + "_SERVICE_PORT": strconv.Itoa(int(first.Port)),
		name + "_PORT":         fmt.Sprintf("%s://%s:%d", strings.ToLower(string(first.Protocol)), ip, first.Port),
	}
	for _, sp := range s.Spec.Ports {
		proto := strings.ToLower(string(sp.Protocol))
		prefix := fmt.Sprintf("%s_PORT_%d_%s", name, sp.Port, strings.ToUpper(proto))
		env[prefix] = fmt.Sprintf("%s://%s:%d", proto, ip, sp.Port)
		env[prefix+"_PROTO"] = proto
		env[prefix+"_PORT"] = strconv.Itoa(int(sp.Port))
		env[prefix+"_ADDR"] = ip
		if sp.Name != "" {
			env[name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(sp.Name, "-", "_"))] = strconv.Itoa(int(sp.Port))
		}
	}
	return env
}

// expand replaces $(VAR) with an earlier variable's value, as the kubelet
// does; $$ is a literal $, and an unknown $(VAR) stays as written.
func expand(s string, vals map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := vals[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// resourceValue is a downward API resourceFieldRef as the kubelet resolves
// it: the container's own value (the ref's container must be this one)
// divided by the divisor and rounded up; a limit the container lacks is the
// node's allocatable, here every CPU of the machine the node runs on.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		return "", fmt.Errorf("resourceFieldRef names container %q, not %q", ref.ContainerName, c.Name)
	}
	var q resource.Quantity
	switch ref.Resource {
	case "limits.cpu":
		q = *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI)
		if l, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			q = l
		}
	case "requests.cpu":
		q = *c.Resources.Requests.Cpu()
	default:
		return "", fmt.Errorf("resourceFieldRef %s is not supported by the test node", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10), nil
}
