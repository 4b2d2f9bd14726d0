package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/test/harness"
)

type mount struct {
	source, target string
	readOnly       bool
	volume         string
	files          bool // written by the node from a Secret, ConfigMap or token
	mode           os.FileMode
}

// prepareVolumes materialises every volume the container mounts.
func (n *Node) prepareVolumes(ctx context.Context, p *corev1.Pod, r *podRun) ([]mount, error) {
	c := &p.Spec.Containers[0]
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	var mounts []mount
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s names no volume", vm.Name)
		}
		dir := filepath.Join(r.dir, "volumes", v.Name)
		m := mount{source: dir, target: vm.MountPath, readOnly: vm.ReadOnly, volume: v.Name, mode: 0o644}
		if v.EmptyDir != nil {
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, err
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, err
			}
		} else {
			files, err := n.volumeFiles(ctx, p, v)
			if err != nil {
				return nil, err
			}
			if v.Secret != nil && v.Secret.DefaultMode != nil {
				m.mode = os.FileMode(*v.Secret.DefaultMode)
			}
			if _, err := writeAtomic(dir, files, m.mode); err != nil {
				return nil, err
			}
			m.files = true
		}
		if vm.SubPath != "" {
			return nil, fmt.Errorf("volumeMount %s: subPath is not supported by the test node", vm.Name)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// writeEtc writes the files a kubelet manages in every container: hosts
// and resolv.conf; and the image's CA bundle with the test's CA added.
func (n *Node) writeEtc(r *podRun, p *corev1.Pod) error {
	root := filepath.Join(r.dir, "root")
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n%s\t%s\n%s\tkubernetes.default.svc kubernetes.default kubernetes\n",
		r.ip, p.Name, harness.KubernetesServiceIP)
	n.mu.Lock()
	o := n.o
	n.mu.Unlock()
	for _, h := range o.Hosts {
		hosts += h + "\n"
	}
	files := map[string][]byte{
		"etc/hosts":       []byte(hosts),
		"etc/resolv.conf": []byte("nameserver " + n.net.Gateway.String() + "\noptions ndots:5\n"),
	}
	if r.image == nil {
		// The played tailscale image: the host's CA bundle stands in for
		// the image's. A pulled image keeps its own.
		bundle, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
		files["etc/ssl/certs/ca-certificates.crt"] = append(bundle, o.TrustedCA...)
	}
	for f, b := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
