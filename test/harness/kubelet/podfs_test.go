package kubelet

import (
	goruntime "runtime"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestResourceValue: the test node resolves a downward API resourceFieldRef
// as the kubelet does (rounded up; a missing limit is the node's).
func TestResourceValue(t *testing.T) {
	one := resource.MustParse("1")
	c := &corev1.Container{Name: "tailscaled", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
	}}
	cases := map[string]struct {
		ref  corev1.ResourceFieldSelector
		lim  string
		want string
	}{
		"RequestRoundedUp": {ref: corev1.ResourceFieldSelector{ContainerName: "tailscaled", Resource: "requests.cpu", Divisor: one}, want: "1"},
		"LimitRoundedUp":   {ref: corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: one}, lim: "1500m", want: "2"},
		"NoLimitIsTheNode": {ref: corev1.ResourceFieldSelector{Resource: "limits.cpu"}, want: strconv.Itoa(goruntime.NumCPU())},
		"MilliCPUDivisor":  {ref: corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}, lim: "250m", want: "250"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := c.DeepCopy()
			if tc.lim != "" {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.lim)}
			}
			got, err := resourceValue(c, &tc.ref)
			if err != nil || got != tc.want {
				t.Errorf("resourceValue(%+v) = %q, %v; want %q", tc.ref, got, err, tc.want)
			}
		})
	}
	if _, err := resourceValue(c, &corev1.ResourceFieldSelector{ContainerName: "other", Resource: "limits.cpu"}); err == nil {
		t.Error("a ref naming another container: want an error")
	}
}
