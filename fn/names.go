package fn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxBaseLen keeps every derived name legal: StatefulSet R-99 must leave
// room for the 11-character controller-revision-hash suffix in a 63-character
// label (R-99-<hash>), and R-99-config and R-99-authkey must fit in 63 too.
const maxBaseLen = 63 - len("-99") - 11

// Labels on every object we compose.
const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelReplica   = "peerrelay.io/replica"
	labelPodName   = "statefulset.kubernetes.io/pod-name"
	appName        = "peerrelay"
)

// baseName derives the prefix of composed object names from the PeerRelay's
// name. Kubernetes allows 253-character names with dots; Services need a
// DNS-1035 label (a letter first, no dots, at most 63). A name that already
// fits is used unchanged; any other is shortened and suffixed with a hash of
// the full name so two long names never collide. The second result says why
// the name was changed, or is empty.
func baseName(name string) (string, string) {
	if len(validation.IsDNS1035Label(name)) == 0 && len(name) <= maxBaseLen {
		return name, ""
	}
	b := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	var why []string
	if b != name {
		why = append(why, "Service names allow only lower-case letters, digits and dashes (no dots)")
	}
	if b == "" || b[0] < 'a' || b[0] > 'z' {
		b = "pr-" + b
		why = append(why, "Service names must start with a letter")
	}
	if len(b) > maxBaseLen {
		why = append(why, fmt.Sprintf("derived names must stay within %d characters", maxBaseLen))
	}
	if len(why) == 0 {
		return b, ""
	}
	suffix := shortHash(name)
	if len(b) > maxBaseLen-len(suffix)-1 {
		b = strings.TrimRight(b[:maxBaseLen-len(suffix)-1], "-")
	}
	return b + "-" + suffix, strings.Join(why, "; ")
}

// shortHash is 8 hex digits of s's sha256.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

func replicaName(base string, i int) string { return base + "-" + strconv.Itoa(i) }

// podName is replica i's pod: the only pod of replica i's own StatefulSet.
func podName(r *relay, i int) string             { return replicaName(r.Base, i) + "-0" }
func configSecretName(base string, i int) string { return replicaName(base, i) + "-config" }
func hostname(prefix string, i int) string       { return prefix + "-" + strconv.Itoa(i) }

// Pipeline resource names: how Crossplane tells our composed resources apart
// across calls. Not object names. Per-replica keys are a prefix and the
// replica's index.
const (
	keyServiceAccount = "serviceaccount"
	keyRole           = "role"
	keyRoleBinding    = "rolebinding"
	keyPodMonitor     = "podmonitor"

	keyPrefixService      = "service-"
	keyPrefixRelayConfig  = "relayconfig-"
	keyPrefixStatefulSet  = "statefulset-"
	keyPrefixEIP          = "eip-"
	keyPrefixLoadBalancer = "lb-"
	keyPrefixTargetGroup  = "targetgroup-"
	keyPrefixListener     = "listener-"
	keyPrefixTarget       = "target-"
)

func svcKey(i int) string         { return keyPrefixService + strconv.Itoa(i) }
func relayConfigKey(i int) string { return keyPrefixRelayConfig + strconv.Itoa(i) }
func statefulSetKey(i int) string { return keyPrefixStatefulSet + strconv.Itoa(i) }
func eipKey(i int) string         { return keyPrefixEIP + strconv.Itoa(i) }
func lbKey(i int) string          { return keyPrefixLoadBalancer + strconv.Itoa(i) }
func targetGroupKey(i int) string { return keyPrefixTargetGroup + strconv.Itoa(i) }
func listenerKey(i int) string    { return keyPrefixListener + strconv.Itoa(i) }

// targetKey names replica i's target registration by its pod's IP: a new
// IP is a new registration, and the old one is deleted with its key.
func targetKey(i int, ip string) string {
	return keyPrefixTarget + strconv.Itoa(i) + "-" + ipLabel(ip)
}

// ipLabel writes an IP address with dashes, as a name may hold it.
func ipLabel(ip string) string { return strings.NewReplacer(".", "-", ":", "-").Replace(ip) }

func selectorLabels(r *relay) map[string]string {
	return map[string]string{labelName: appName, labelInstance: r.Base}
}

func commonLabels(r *relay) map[string]string {
	l := selectorLabels(r)
	l[labelManagedBy] = "function-peerrelay"
	return l
}

func replicaLabels(r *relay, i int) map[string]string {
	l := commonLabels(r)
	l[labelReplica] = strconv.Itoa(i)
	return l
}
