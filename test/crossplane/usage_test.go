package crossplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peerrelay/peerrelay/test/harness"
	cloudharness "github.com/peerrelay/peerrelay/test/harness/cloud"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

const (
	eipAPI = "ec2.aws.m.upbound.io/v1beta1"
	lbAPI  = "elbv2.aws.m.upbound.io/v1beta1"
	// deletionAttempt is what Crossplane's Usage webhook records on a
	// resource whose deletion it refused, for the Usage to replay.
	deletionAttempt = "usage.crossplane.io/deletion-attempt-with-policy"
)

// deleteOrder: deleting a PeerRelay with an allocated Elastic IP deletes
// what holds the address before the Elastic IP, as AWS needs (an NLB's
// address cannot be released while the NLB has it): the replica's Service
// (Controller: the AWS Load Balancer Controller's NLB) or its composed NLB
// (Managed). The Usage the function composes does it, enforced by
// Crossplane's own webhook and replayed by its Usage controller.
//
// Upbound's provider-aws cannot run here. The test plays what it would do
// for the composed EIP (allocate it in moto, report its allocation ID) and
// installs its CRDs and the RBAC Crossplane's RBAC manager gives Crossplane
// for an installed provider's kinds. A finalizer holds the user while it is
// torn down in AWS: the AWS Load Balancer Controller's on the Service,
// provider-aws's on the NLB. Crossplane, the function, provider-peerrelay's
// check against the AWS API (moto) and the webhook are real.
func (s *system) deleteOrder(ctx context.Context, t *testing.T) {
	s.installNamespacedUpbound(t)
	moto := cloudharness.StartMotoOn(t, s.node.ServicesIP().String())
	const ns = "team-aws"
	network := moto.CreateAWSNetwork(t, ns)
	s.awsInDefaultProviderConfig(t, moto.Endpoint)
	s.namespaceWithKey(t, ns)
	for _, tc := range []struct {
		loadBalancer string
		// The user of the EIP and the finalizer that holds it.
		userAPI, userKind, finalizer string
	}{
		{"Controller", "v1", "Service", "service.k8s.aws/resources"},
		{"Managed", lbAPI, "LB", "finalizer.managedresource.crossplane.io"},
	} {
		t.Run(tc.loadBalancer, func(t *testing.T) {
			name := strings.ToLower(tc.loadBalancer)
			s.applyPeerRelay(t, ns, name, fmt.Sprintf(`replicas: 1
tags: ["tag:relay"]
authKeySecretRef: {name: tailscale-auth}
aws: {region: us-east-1, subnets: [%s], allocate: true, loadBalancer: %s}`, network.PublicSubnet, tc.loadBalancer))
			eip := s.allocateEIP(ctx, t, moto, ns, name)

			// Once provider-peerrelay has checked the subnet and the
			// allocation against AWS, the user is composed, and the Usage
			// with it, for which Crossplane's Usage controller marks the
			// EIP in use.
			var user *unstructured.Unstructured
			harness.Eventually(t, 2*time.Minute, tc.userKind+" composed and the EIP in use", func(ctx context.Context) error {
				users, err := s.List(ctx, tc.userAPI, tc.userKind, ns, client.MatchingLabels{"app.kubernetes.io/instance": name})
				if err != nil {
					return err
				}
				if len(users) != 1 {
					rc, err := s.Get(ctx, relayAPI, "RelayConfig", ns, name+"-0")
					if err != nil {
						return err
					}
					_, msg := condition(rc, "AWSPlacementValid")
					return fmt.Errorf("%d %ss; the RelayConfig's AWSPlacementValid: %s", len(users), tc.userKind, msg)
				}
				user = &users[0]
				u, err := s.Get(ctx, eipAPI, "EIP", ns, eip)
				if err != nil {
					return err
				}
				if u.GetLabels()["crossplane.io/in-use"] != "true" {
					return fmt.Errorf("EIP %s not labelled in use: %v", eip, u.GetLabels())
				}
				return nil
			})
			t.Logf("%s: %s %s composed; EIP %s in use", time.Now().Format("15:04:05.000"), tc.userKind, user.GetName(), eip)
			usages, err := s.List(ctx, "protection.crossplane.io/v1beta1", "Usage", ns, client.MatchingLabels{"app.kubernetes.io/instance": name})
			if err != nil || len(usages) != 1 {
				t.Fatalf("want one Usage for %s: %d, %v", name, len(usages), err)
			}
			if by, _, _ := unstructured.NestedString(usages[0].Object, "spec", "by", "resourceRef", "name"); by != user.GetName() {
				t.Errorf("the Usage is by %q, want the %s %q", by, tc.userKind, user.GetName())
			}
			s.editFinalizers(ctx, t, user, func(f []string) []string { return append(f, tc.finalizer) })
			// release lets the user go, as its controller does once the NLB
			// is deleted in AWS.
			release := func() error {
				u, err := s.Get(ctx, tc.userAPI, tc.userKind, ns, user.GetName())
				if err != nil {
					return err
				}
				if slices.Contains(u.GetFinalizers(), tc.finalizer) {
					s.editFinalizers(ctx, t, u, func(f []string) []string {
						return slices.DeleteFunc(f, func(x string) bool { return x == tc.finalizer })
					})
				}
				return nil
			}
			t.Cleanup(func() { _ = release() }) // a failure below leaves nothing held

			// Everything is deleted at once; the EIP's deletion is refused
			// and recorded while its user is held.
			s.deletePeerRelay(t, ns, name)
			harness.Eventually(t, time.Minute, "the EIP's deletion refused while its "+tc.userKind+" is held", func(ctx context.Context) error {
				u, err := s.Get(ctx, tc.userAPI, tc.userKind, ns, user.GetName())
				if err != nil {
					return err
				}
				if u.GetDeletionTimestamp() == nil {
					return fmt.Errorf("the %s is not being deleted yet", tc.userKind)
				}
				e, err := s.Get(ctx, eipAPI, "EIP", ns, eip)
				if err != nil {
					return fmt.Errorf("the EIP went before its %s: %w", tc.userKind, err)
				}
				if e.GetDeletionTimestamp() != nil {
					return fmt.Errorf("the EIP is being deleted while its %s still is", tc.userKind)
				}
				if _, ok := e.GetAnnotations()[deletionAttempt]; !ok {
					return fmt.Errorf("no deletion of the EIP attempted yet")
				}
				return nil
			})
			t.Logf("%s: the EIP's deletion refused while its %s is held", time.Now().Format("15:04:05.000"), tc.userKind)

			// The NLB is gone: its holder goes, then the EIP, and the
			// PeerRelay.
			if err := release(); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, time.Minute, "the EIP deleted after its "+tc.userKind, func(ctx context.Context) error {
				if _, err := s.Get(ctx, eipAPI, "EIP", ns, eip); !kerrors.IsNotFound(err) {
					return fmt.Errorf("the EIP is still there (%v)", err)
				}
				if _, err := s.Get(ctx, v2API, "PeerRelay", ns, name); !kerrors.IsNotFound(err) {
					return fmt.Errorf("the PeerRelay is still there (%v)", err)
				}
				return nil
			})
			t.Logf("%s: the %s, then the EIP and the PeerRelay gone", time.Now().Format("15:04:05.000"), tc.userKind)
		})
	}
	// The relays' RelayConfigs, pods and Secrets go in the background, as
	// Kubernetes' garbage collector gets to them: up to a minute was seen.
	s.waitEmpty(ctx, t, ns, 2*time.Minute)
}

// allocateEIP plays provider-aws for PeerRelay ns/name's one composed EIP:
// allocates an address in moto, tagged as composed (the provider uses an
// Elastic IP only when its tags say it is the namespace's), and reports its
// allocation ID. It returns the EIP's name.
func (s *system) allocateEIP(ctx context.Context, t *testing.T, moto *cloudharness.Moto, ns, name string) string {
	t.Helper()
	var eip *unstructured.Unstructured
	harness.Eventually(t, time.Minute, "the PeerRelay's EIP composed", func(ctx context.Context) error {
		eips, err := s.List(ctx, eipAPI, "EIP", ns, client.MatchingLabels{"app.kubernetes.io/instance": name})
		if err != nil {
			return err
		}
		if len(eips) != 1 {
			return fmt.Errorf("%d EIPs", len(eips))
		}
		eip = &eips[0]
		return nil
	})
	composed, _, err := unstructured.NestedStringMap(eip.Object, "spec", "forProvider", "tags")
	if err != nil || len(composed) == 0 {
		t.Fatalf("the EIP's spec.forProvider.tags: %v, %v", composed, err)
	}
	alloc := moto.AllocateAddress(t, composed)
	patch := fmt.Sprintf(`{"status":{"atProvider":{"allocationId":%q,"id":%q}}}`, alloc, alloc)
	if err := s.Admin.Status().Patch(ctx, eip, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("reporting the EIP's allocation ID: %v", err)
	}
	return eip.GetName()
}

// editFinalizers changes an object's finalizers as its controller would:
// the patch carries the resource version the finalizers were read at, so
// no one else's is lost, and an object written meanwhile (Crossplane's
// apply, the cloud's status) is read and edited again.
func (s *system) editFinalizers(ctx context.Context, t *testing.T, u *unstructured.Unstructured, edit func([]string) []string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		now, err := s.Get(ctx, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
		if err != nil {
			return err
		}
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": edit(now.GetFinalizers()), "resourceVersion": now.GetResourceVersion()}})
		if err != nil {
			return err
		}
		return s.Admin.Patch(ctx, now, client.RawPatch(types.MergePatchType, b))
	})
	if err != nil {
		t.Fatalf("setting the finalizers of %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// installNamespacedUpbound installs the CRDs of Upbound's namespaced EIP
// and elbv2 kinds (ec2.aws.m.upbound.io, elbv2.aws.m.upbound.io) and lets
// Crossplane manage them, as installing provider-aws-ec2 and -elbv2 v2
// would. The module proxy serves provider-aws v1 only, whose kinds are
// cluster-scoped: each CRD is v1's under the .m. group, namespaced (the
// render test's ServerSideDryRun says what that leaves unchecked).
func (s *system) installNamespacedUpbound(t *testing.T) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, f := range []string{"ec2.aws.upbound.io_eips", "elbv2.aws.upbound.io_lbs", "elbv2.aws.upbound.io_lbtargetgroups",
		"elbv2.aws.upbound.io_lblisteners", "elbv2.aws.upbound.io_lbtargetgroupattachments"} {
		b, err := os.ReadFile(filepath.Join(root, ".cache", "upbound-crds", f+".yaml"))
		harness.Need(t, err == nil, "the Upbound AWS CRDs in .cache/upbound-crds (make tools): %v", err)
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &crd.Object); err != nil {
			t.Fatal(err)
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		group = strings.Replace(group, ".aws.upbound.io", ".aws.m.upbound.io", 1)
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		crd.SetName(plural + "." + group)
		_ = unstructured.SetNestedField(crd.Object, group, "spec", "group")
		_ = unstructured.SetNestedField(crd.Object, "Namespaced", "spec", "scope")
		j, err := crd.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, string(j))
	}
	objs = append(objs, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
"metadata":{"name":"crossplane:provider-aws:peerrelay-kinds","labels":{"rbac.crossplane.io/aggregate-to-crossplane":"true"}},
"rules":[{"apiGroups":["ec2.aws.m.upbound.io","elbv2.aws.m.upbound.io"],"resources":["*"],"verbs":["*"]}]}`)
	s.applyJSON(t, objs...)
	if out, err := s.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/eips.ec2.aws.m.upbound.io", "crd/lbs.elbv2.aws.m.upbound.io", "crd/lbtargetgroups.elbv2.aws.m.upbound.io",
		"crd/lblisteners.elbv2.aws.m.upbound.io", "crd/lbtargetgroupattachments.elbv2.aws.m.upbound.io"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// awsInDefaultProviderConfig gives the ClusterProviderConfig "default" AWS
// credentials for the moto at endpoint, until the test ends.
func (s *system) awsInDefaultProviderConfig(t *testing.T, endpoint string) {
	t.Helper()
	s.applyJSON(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"aws-creds","namespace":%q},
"stringData":{"aws_access_key_id":"testing","aws_secret_access_key":"testing"}}`, xpharness.CrossplaneNamespace))
	patch := func(aws string) {
		if out, err := s.Kubectl(t, "patch", "clusterproviderconfig.relay.peerrelay.io", "default", "--type=merge",
			"-p", `{"spec":{"aws":`+aws+`}}`); err != nil {
			t.Errorf("%v: %s", err, out)
		}
	}
	patch(fmt.Sprintf(`{"source":"Secret","secretRef":{"name":"aws-creds","namespace":%q},"region":"us-east-1","endpoint":%q}`,
		xpharness.CrossplaneNamespace, endpoint))
	t.Cleanup(func() { patch("null") })
}
