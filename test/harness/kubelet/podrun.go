package kubelet

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/peerrelay/peerrelay/test/harness"
)

// podRun is one pod the node runs: its sandbox and its container.
type podRun struct {
	ns, name string
	uid      types.UID
	dir      string
	netns    string
	ip       netip.Addr
	mounts   []mount
	log      *harness.SyncBuffer
	image    *v1.Config // nil: the played tailscale image

	terminating atomic.Bool
	stopOnce    sync.Once
	quit        chan struct{}
	exited      chan struct{}

	mu       sync.Mutex
	cmd      *exec.Cmd
	ready    bool
	restarts int32
	last     *corev1.ContainerStateTerminated // how the container last ended
}

// recordExit keeps how the container ended, as a kubelet's lastState does,
// with the end of its output as the message (terminationMessagePolicy
// FallbackToLogsOnError): what a crash loop says.
func (r *podRun) recordExit(err error) {
	code := int32(0)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = int32(ee.ExitCode())
	}
	reason := "Completed"
	if err != nil {
		reason = "Error"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: harness.Tail(r.log.String(), 2048), FinishedAt: metav1.Now()}
}

// supervise runs the container, restarts it when it exits (the kubelet's
// back-off: 10 s doubling to 5 min), probes its readiness and reports both
// in the pod's status, until the pod is stopped.
func (r *podRun) supervise(n *Node, p *corev1.Pod) {
	defer close(r.exited)
	backoff := 10 * time.Second
	started := metav1.Now()
	for {
		select {
		case <-r.quit:
			return
		default:
		}
		cmd, err := r.startContainer(n, p)
		if err != nil {
			_, _ = r.log.Write([]byte("node: cannot start the container: " + err.Error() + "\n"))
		} else {
			r.mu.Lock()
			r.cmd = cmd
			r.mu.Unlock()
			started = metav1.Now()
			n.writeStatus(r, p, started, nil)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if r.probeUntilExit(n, p, started, exited) {
				return
			}
		}
		r.mu.Lock()
		r.restarts++
		r.ready = false
		r.mu.Unlock()
		n.writeStatus(r, p, started, &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"})
		select {
		case <-r.quit:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Minute)
	}
}

// probeUntilExit probes readiness until the container exits (false) or the
// pod is stopped (true).
func (r *podRun) probeUntilExit(n *Node, p *corev1.Pod, started metav1.Time, exited chan error) bool {
	c := &p.Spec.Containers[0]
	rp := c.ReadinessProbe
	period, failures, fails := 10*time.Second, int32(3), int32(0)
	if rp != nil {
		if rp.PeriodSeconds > 0 {
			period = time.Duration(rp.PeriodSeconds) * time.Second
		}
		if rp.FailureThreshold > 0 {
			failures = rp.FailureThreshold
		}
	}
	var initial <-chan time.Time
	if rp != nil {
		initial = time.After(time.Duration(rp.InitialDelaySeconds) * time.Second)
	} else {
		// No readiness probe: ready once running, as on a kubelet.
		r.mu.Lock()
		r.ready = true
		r.mu.Unlock()
		n.writeStatus(r, p, started, nil)
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		check := false
		select {
		case <-r.quit:
			return true
		case err := <-exited:
			r.recordExit(err)
			_, _ = r.log.Write([]byte("node: container exited: " + errString(err) + "\n"))
			return false
		case <-initial:
			initial, check = nil, true
		case <-tick.C:
			check = initial == nil
		}
		if !check {
			continue
		}
		ok := true
		if rp != nil {
			ok = probe(r.ip, c, rp)
		}
		r.mu.Lock()
		was := r.ready
		switch {
		case ok:
			fails = 0
			r.ready = true
		default:
			if fails++; fails >= failures || !was {
				r.ready = false
			}
		}
		changed := was != r.ready
		r.mu.Unlock()
		if changed {
			n.writeStatus(r, p, started, nil)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// writeStatus reports the pod as a kubelet does: Running with its address,
// the container's state, restarts and readiness.
func (n *Node) writeStatus(r *podRun, p *corev1.Pod, started metav1.Time, waiting *corev1.ContainerStateWaiting) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur := &corev1.Pod{}
	if err := n.admin.Get(ctx, types.NamespacedName{Namespace: r.ns, Name: r.name}, cur); err != nil || cur.UID != r.uid {
		return
	}
	r.mu.Lock()
	ready, restarts, last := r.ready, r.restarts, r.last
	r.mu.Unlock()
	orig := cur.DeepCopy()
	now := metav1.Now()
	cond := func(ok bool) corev1.ConditionStatus {
		if ok {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	c := &cur.Spec.Containers[0]
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: ready, RestartCount: restarts, Started: ptr.To(waiting == nil)}
	if last != nil {
		cs.LastTerminationState.Terminated = last
	}
	if waiting != nil {
		cs.State.Waiting = waiting
	} else {
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
	}
	cur.Status.Phase = corev1.PodRunning
	cur.Status.HostIP = n.net.Gateway.String()
	cur.Status.HostIPs = []corev1.HostIP{{IP: cur.Status.HostIP}}
	cur.Status.PodIP = r.ip.String()
	cur.Status.PodIPs = []corev1.PodIP{{IP: r.ip.String()}}
	if cur.Status.StartTime == nil {
		cur.Status.StartTime = &now
	}
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	cur.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: cond(ready), LastTransitionTime: now},
		{Type: corev1.PodReady, Status: cond(ready), LastTransitionTime: now},
	}
	_ = n.admin.Status().Patch(ctx, cur, client.MergeFrom(orig))
}

// refresh brings the pod's Secret and ConfigMap volumes up to date, as the
// kubelet's periodic sync does (an atomic swap per changed volume).
func (r *podRun) refresh(ctx context.Context, n *Node, p *corev1.Pod) {
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, m := range r.mounts {
		v := vols[m.volume]
		if !m.files || v.Projected != nil {
			continue // tokens last their hour; the test is shorter
		}
		files, err := n.volumeFiles(ctx, p, v)
		if err != nil {
			continue // a deleted Secret: the kubelet keeps the last content
		}
		_, _ = writeAtomic(m.source, files, m.mode)
	}
}

// stop ends the container (SIGTERM, SIGKILL after grace) and removes the
// pod's sandbox.
func (r *podRun) stop(grace time.Duration) {
	r.stopOnce.Do(func() {
		close(r.quit)
		r.mu.Lock()
		cmd := r.cmd
		r.mu.Unlock()
		if cmd != nil && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() {
				for {
					if err := syscall.Kill(-cmd.Process.Pid, 0); err != nil {
						close(done)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			select {
			case <-done:
			case <-time.After(grace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		}
		if r.netns != "" { // a started pod: wait for its supervisor
			<-r.exited
		}
		if r.netns != "" {
			removeNetns(r.netns)
		}
		_ = os.RemoveAll(r.dir)
	})
}
