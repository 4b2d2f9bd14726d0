package crossplane

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// The names Crossplane's dependency resolution gives our packages (from
// their repository paths), which prefix their Deployments and pods.
const (
	functionName = "peerrelay-function-peerrelay"
	providerName = "peerrelay-provider-peerrelay"
)

// whileProviderDown takes the provider down while f runs: its pods are
// held off the node (under the default runtime a deleted pod would be
// replaced at once), or its process stopped under the External runtime.
func (s *system) whileProviderDown(f func()) {
	if s.runtime != nil {
		s.runtime.WhileProviderDown(f)
		return
	}
	release := s.node.Hold(func(p *corev1.Pod) bool {
		return p.Namespace == xpharness.CrossplaneNamespace && strings.HasPrefix(p.Name, providerName)
	})
	defer release()
	f()
}
