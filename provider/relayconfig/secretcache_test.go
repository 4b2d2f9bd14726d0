package relayconfig

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/peerrelay/peerrelay/provider/tsconfig"
)

// TestStripSecret: the cache keeps of a Secret only what the provider
// reads, each value bounded, and marks one that held more.
func TestStripSecret(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	ours := map[string]string{LabelManagedBy: ManagedBy, labelRelay: "r-0"}
	type want struct {
		labels, annotations map[string]string
		data                map[string][]byte
	}
	cases := map[string]struct {
		reason string
		in     *corev1.Secret
		want   want
	}{
		"StateSecret": {
			reason: "A state Secret keeps its device ID and reissue request; tailscaled's profile and keys are dropped, and marked so.",
			in: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: ours}, Data: map[string][]byte{
				stateSecretDeviceIDKey: []byte("nDev"), stateSecretReissueKey: []byte("file:/k"), "_machinekey": []byte("m"), "profile-1": big}},
			want: want{labels: ours, data: map[string][]byte{stateSecretDeviceIDKey: []byte("nDev"), stateSecretReissueKey: []byte("file:/k"), strippedKey: nil}},
		},
		"ConfigSecret": {
			reason: "A config Secret as the provider writes it is kept whole.",
			in:     &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: ours}, Data: map[string][]byte{tsconfig.FileName: []byte(`{"Version":"alpha0"}`)}},
			want:   want{labels: ours, data: map[string][]byte{tsconfig.FileName: []byte(`{"Version":"alpha0"}`)}},
		},
		"MintedKeySecret": {
			reason: "A minted key's Secret keeps its key and the provider's annotations; others go.",
			in: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: ours,
				Annotations: map[string]string{annotationKeyID: "k1", "kubectl.kubernetes.io/last-applied-configuration": string(big)}},
				Data: map[string][]byte{mintedDataKey("k1"): []byte("tskey-auth-k1")}},
			want: want{labels: ours, annotations: map[string]string{annotationKeyID: "k1"}, data: map[string][]byte{mintedDataKey("k1"): []byte("tskey-auth-k1")}},
		},
		"TenantsHeavySecret": {
			reason: "A tenant's Secret with the provider's label and 1 MiB under a key the provider reads keeps none of it: a cached Secret costs hundreds of bytes, not a mebibyte.",
			in: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Labels:        map[string]string{LabelManagedBy: ManagedBy, "padding": string(big[:63])},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
				Finalizers:    manyFinalizers(),
				OwnerReferences: append(manyOwners(),
					metav1.OwnerReference{Kind: "RelayConfig", Name: "r-0", UID: "u", Controller: ptr.To(true)})},
				Data: map[string][]byte{tsconfig.FileName: big, stateSecretDeviceIDKey: big, "a": big}},
			want: want{labels: map[string]string{LabelManagedBy: ManagedBy}, data: map[string][]byte{strippedKey: nil}},
		},
		"ManyKeys": {
			reason: "At most maxCachedKeys keys the provider reads are kept.",
			in: &corev1.Secret{Data: map[string][]byte{
				mintedDataKey("1"): []byte("k"), mintedDataKey("2"): []byte("k"), mintedDataKey("3"): []byte("k"),
				mintedDataKey("4"): []byte("k"), mintedDataKey("5"): []byte("k"), mintedDataKey("6"): []byte("k")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := StripSecret(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			s := out.(*corev1.Secret)
			if name == "ManyKeys" {
				if _, marked := s.Data[strippedKey]; len(s.Data) != maxCachedKeys+1 || !marked {
					t.Errorf("%s\nkept %d keys (marked %v); want %d and the mark", tc.reason, len(s.Data), marked, maxCachedKeys)
				}
				return
			}
			got := want{labels: s.Labels, annotations: s.Annotations, data: s.Data}
			if len(got.annotations) == 0 {
				got.annotations = nil
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			if s.ManagedFields != nil || s.Finalizers != nil {
				t.Errorf("%s\nmanaged fields or finalizers kept", tc.reason)
			}
			if len(s.OwnerReferences) > 1 || (len(tc.in.OwnerReferences) > 0 && metav1.GetControllerOfNoCopy(s) == nil) {
				t.Errorf("%s\nowner references kept: %d, want only the controller's", tc.reason, len(s.OwnerReferences))
			}
		})
	}
}

// TestStripSecretPassesOthers: only Secrets are stripped.
func TestStripSecretPassesOthers(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "b"}}}
	out, _ := StripSecret(svc)
	if out.(*corev1.Service).Annotations["a"] != "b" {
		t.Error("a Service lost its annotations")
	}
}

// manyFinalizers and manyOwners are what a tenant may pile on a Secret's
// metadata: the cache keeps none of the finalizers, and of the owner
// references only the controller's.
func manyFinalizers() []string {
	out := make([]string, 1000)
	for i := range out {
		out[i] = fmt.Sprintf("example.com/f-%04d-%s", i, strings.Repeat("x", 200))
	}
	return out
}

func manyOwners() []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 1000)
	for i := range out {
		out[i] = metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: fmt.Sprint("t-", i), UID: "u"}
	}
	return out
}
