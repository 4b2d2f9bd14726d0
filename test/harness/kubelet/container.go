package kubelet

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// runtimeScript is run in the pod's network namespace by `ip netns exec`,
// which also gives it a private mount namespace: it binds the pod's root
// together and switches into it as the container's user.
func (r *podRun) runtimeScript(bin string, c *corev1.Container, uid, gid int64, readOnlyRoot bool) string {
	root := filepath.Join(r.dir, "root")
	var s []string
	q := func(x string) string { return "'" + strings.ReplaceAll(x, "'", `'\''`) + "'" }
	mkdir := func(p string) { s = append(s, "mkdir -p "+q(filepath.Join(root, p))) }
	bind := func(src, dst string, ro bool) {
		s = append(s, fmt.Sprintf("mount --rbind %s %s", q(src), q(filepath.Join(root, dst))))
		if ro {
			s = append(s, fmt.Sprintf("mount -o remount,bind,ro %s", q(filepath.Join(root, dst))))
		}
	}
	s = append(s, "set -e")
	for _, d := range []string{"dev", "proc", "tmp"} {
		mkdir(d)
	}
	if r.image == nil {
		mkdir("usr/local/bin")
	}
	for _, m := range r.mounts {
		mkdir(m.target)
	}
	s = append(s, fmt.Sprintf("mount --bind %s %s", q(root), q(root)))
	if r.image == nil {
		bind(bin, "usr/local/bin", true)
	}
	bind("/dev", "dev", false)
	bind("/proc", "proc", false)
	for _, m := range r.mounts {
		bind(m.source, m.target, m.readOnly)
	}
	if readOnlyRoot {
		s = append(s, fmt.Sprintf("mount -o remount,bind,ro %s", q(root)))
	}
	argv := r.argv(c)
	for i := range argv {
		argv[i] = q(argv[i])
	}
	s = append(s, fmt.Sprintf("cd / && exec chroot --userspec=%d:%d %s %s", uid, gid, q(root), strings.Join(argv, " ")))
	return strings.Join(s, "\n")
}

// argv is what the container runs, as a kubelet combines the container's
// command and args with the image's entrypoint and cmd.
func (r *podRun) argv(c *corev1.Container) []string {
	entrypoint, cmd := []string{"/usr/local/bin/containerboot"}, []string(nil)
	if r.image != nil {
		entrypoint, cmd = r.image.Entrypoint, r.image.Cmd
	}
	switch {
	case len(c.Command) > 0:
		return append(append([]string{}, c.Command...), c.Args...)
	case len(c.Args) > 0:
		return append(append([]string{}, entrypoint...), c.Args...)
	default:
		return append(append([]string{}, entrypoint...), cmd...)
	}
}

// identity is the user and group the container runs as: the image's,
// unless the pod or container says otherwise.
func identity(p *corev1.Pod, c *corev1.Container, image *v1.Config) (uid, gid int64, readOnlyRoot bool) {
	uid, gid = imageUser(image)
	if ps := p.Spec.SecurityContext; ps != nil {
		uid, gid = ptr.Deref(ps.RunAsUser, uid), ptr.Deref(ps.RunAsGroup, gid)
	}
	if cs := c.SecurityContext; cs != nil {
		uid = ptr.Deref(cs.RunAsUser, uid)
		gid = ptr.Deref(cs.RunAsGroup, gid)
		readOnlyRoot = ptr.Deref(cs.ReadOnlyRootFilesystem, false)
	}
	return uid, gid, readOnlyRoot
}

// startContainer starts the container's processes in the pod's sandbox.
func (r *podRun) startContainer(n *Node, p *corev1.Pod) (*exec.Cmd, error) {
	c := &p.Spec.Containers[0]
	env, err := n.containerEnv(context.Background(), p, c, r.image)
	if err != nil {
		return nil, err
	}
	uid, gid, ro := identity(p, c, r.image)
	cmd := exec.Command("ip", "netns", "exec", r.netns, "/bin/sh", "-c", r.runtimeScript(n.bin, c, uid, gid, ro))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}
