package crossplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peerrelay/peerrelay/test/harness"
	cloudharness "github.com/peerrelay/peerrelay/test/harness/cloud"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

const (
	eipAPI = "ec2.aws.m.upbound.io/v1beta1"
	// lbControllerFinalizer is the AWS Load Balancer Controller's on a
	// Service whose NLB it still has to delete.
	lbControllerFinalizer = "service.k8s.aws/resources"
	// deletionAttempt is what Crossplane's Usage webhook records on a
	// resource whose deletion it refused, for the Usage to replay.
	deletionAttempt = "usage.crossplane.io/deletion-attempt-with-policy"
)

// deleteOrder: deleting a PeerRelay with an allocated Elastic IP deletes its
// Service before the Elastic IP, as AWS needs (an NLB's address cannot be
// released while the NLB holds it). The Usage the function composes does
// it, enforced by Crossplane's own webhook and replayed by its Usage
// controller.
//
// Upbound's provider-aws cannot run here. The test plays what it would do
// for the composed EIP (allocate it in moto, report its allocation ID) and
// installs its CRD and the RBAC Crossplane's RBAC manager gives Crossplane
// for an installed provider's kinds. It plays the AWS Load Balancer
// Controller too: its finalizer holds the Service while it deletes the NLB.
// Crossplane, the function, provider-peerrelay's check against the AWS API
// (moto) and the webhook are real.
func (s *system) deleteOrder(ctx context.Context, t *testing.T) {
	const ns, name = "team-aws", "edge"
	s.installNamespacedEIPs(t)
	moto := cloudharness.StartMotoOn(t, s.node.ServicesIP().String())
	network := moto.CreateAWSNetwork(t)
	s.awsInDefaultProviderConfig(t, moto.Endpoint)

	s.namespaceWithKey(t, ns)
	s.applyPeerRelay(t, ns, name, fmt.Sprintf(`replicas: 1
tags: ["tag:relay"]
authKeySecretRef: {name: tailscale-auth}
aws: {region: us-east-1, subnets: [%s], allocate: true}`, network.PublicSubnet))

	// provider-aws's part: the EIP is allocated and reports its ID.
	var eip *unstructured.Unstructured
	harness.Eventually(t, time.Minute, "the PeerRelay's EIP composed", func(ctx context.Context) error {
		eips, err := s.List(ctx, eipAPI, "EIP", ns)
		if err != nil {
			return err
		}
		if len(eips) != 1 {
			return fmt.Errorf("%d EIPs", len(eips))
		}
		eip = &eips[0]
		return nil
	})
	ec2c, _ := moto.AWSClients()
	alloc, err := ec2c.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"status":{"atProvider":{"allocationId":%q,"id":%q}}}`, *alloc.AllocationId, *alloc.AllocationId)
	if err := s.Admin.Status().Patch(ctx, eip, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("reporting the EIP's allocation ID: %v", err)
	}

	// Once provider-peerrelay has checked the subnet and the allocation
	// against AWS, the Service is composed, and the Usage with it, which
	// Crossplane's Usage controller marks the EIP in use for.
	svc := &corev1.Service{}
	harness.Eventually(t, 2*time.Minute, "the Service composed and the EIP in use", func(ctx context.Context) error {
		svcs := &corev1.ServiceList{}
		if err := s.Admin.List(ctx, svcs, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
			return err
		}
		if len(svcs.Items) != 1 {
			rc, err := s.Get(ctx, relayAPI, "RelayConfig", ns, name+"-0")
			if err != nil {
				return err
			}
			_, msg := condition(rc, "AWSPlacementValid")
			return fmt.Errorf("%d Services; the RelayConfig's AWSPlacementValid: %s", len(svcs.Items), msg)
		}
		*svc = svcs.Items[0]
		u, err := s.Get(ctx, eipAPI, "EIP", ns, eip.GetName())
		if err != nil {
			return err
		}
		if u.GetLabels()["crossplane.io/in-use"] != "true" {
			return fmt.Errorf("EIP %s not labelled in use: %v", u.GetName(), u.GetLabels())
		}
		return nil
	})
	t.Logf("%s: Service %s composed; EIP %s (%s) in use", time.Now().Format("15:04:05.000"), svc.Name, eip.GetName(), *alloc.AllocationId)
	usages, err := s.List(ctx, "protection.crossplane.io/v1beta1", "Usage", ns)
	if err != nil || len(usages) != 1 {
		t.Fatalf("want one Usage in %s: %d, %v", ns, len(usages), err)
	}
	if by, _, _ := unstructured.NestedString(usages[0].Object, "spec", "by", "resourceRef", "name"); by != svc.Name {
		t.Errorf("the Usage is by %q, want the Service %q", by, svc.Name)
	}
	orig := svc.DeepCopy()
	svc.Finalizers = append(svc.Finalizers, lbControllerFinalizer)
	if err := s.Admin.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}

	// Everything is deleted at once; the EIP's deletion is refused and
	// recorded while the Service waits for its NLB.
	s.deletePeerRelay(t, ns, name)
	harness.Eventually(t, time.Minute, "the EIP's deletion refused while the Service is held", func(ctx context.Context) error {
		if err := s.Admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		if svc.DeletionTimestamp == nil {
			return fmt.Errorf("the Service is not being deleted yet")
		}
		u, err := s.Get(ctx, eipAPI, "EIP", ns, eip.GetName())
		if err != nil {
			return fmt.Errorf("the EIP went before the Service: %w", err)
		}
		if u.GetDeletionTimestamp() != nil {
			return fmt.Errorf("the EIP is being deleted while its Service still is")
		}
		if _, ok := u.GetAnnotations()[deletionAttempt]; !ok {
			return fmt.Errorf("no deletion of the EIP attempted yet")
		}
		return nil
	})
	t.Logf("%s: the EIP's deletion refused while Service %s waits for its NLB", time.Now().Format("15:04:05.000"), svc.Name)

	// The NLB is gone: the Service goes, then the EIP, and the PeerRelay.
	orig = svc.DeepCopy()
	svc.Finalizers = nil
	if err := s.Admin.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "the EIP deleted after its Service", func(ctx context.Context) error {
		if _, err := s.Get(ctx, eipAPI, "EIP", ns, eip.GetName()); !kerrors.IsNotFound(err) {
			return fmt.Errorf("the EIP is still there (%v)", err)
		}
		if _, err := s.Get(ctx, v2API, "PeerRelay", ns, name); !kerrors.IsNotFound(err) {
			return fmt.Errorf("the PeerRelay is still there (%v)", err)
		}
		return nil
	})
	t.Logf("%s: the Service, then the EIP and the PeerRelay gone", time.Now().Format("15:04:05.000"))
	s.waitEmpty(ctx, t, ns, time.Minute)
}

// installNamespacedEIPs installs the CRD of Upbound's namespaced EIP
// (ec2.aws.m.upbound.io) and lets Crossplane manage EIPs, as installing
// provider-aws-ec2 v2 would. The module proxy serves provider-aws v1 only,
// whose EIP is cluster-scoped: the CRD is that one under the .m. group,
// namespaced (the test render's ServerSideDryRun says what this skips).
func (s *system) installNamespacedEIPs(t *testing.T) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, ".cache", "upbound-crds", "ec2.aws.upbound.io_eips.yaml"))
	harness.Need(t, err == nil, "the Upbound AWS CRDs in .cache/upbound-crds (make tools): %v", err)
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &crd.Object); err != nil {
		t.Fatal(err)
	}
	crd.SetName("eips.ec2.aws.m.upbound.io")
	_ = unstructured.SetNestedField(crd.Object, "ec2.aws.m.upbound.io", "spec", "group")
	_ = unstructured.SetNestedField(crd.Object, "Namespaced", "spec", "scope")
	j, err := crd.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	s.applyJSON(t, string(j), `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
"metadata":{"name":"crossplane:provider-aws-ec2:eips","labels":{"rbac.crossplane.io/aggregate-to-crossplane":"true"}},
"rules":[{"apiGroups":["ec2.aws.m.upbound.io"],"resources":["eips","eips/status"],"verbs":["*"]}]}`)
	if out, err := s.Kubectl(t, "wait", "--for=condition=Established", "crd/eips.ec2.aws.m.upbound.io", "--timeout=60s"); err != nil {
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
