package relayconfig

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// cluster is controller-runtime's fake client holding the test's objects,
// with the writes made through it recorded in order ("create Secret/name")
// and calls made to fail on demand (by "verb Kind/name").
type cluster struct {
	client.WithWatch
	writes []string
	gets   []string // "Kind/name" of every Get
	fail   map[string]error
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func newCluster(objs ...client.Object) *cluster {
	c := &cluster{fail: map[string]error{}}
	c.WithWatch = fake.NewClientBuilder().
		WithScheme(testScheme()).
		WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.RelayConfig{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.failure("get", cl, obj, key.Name); err != nil {
					return err
				}
				c.gets = append(c.gets, c.key(cl, obj, key.Name))
				return cl.Get(ctx, key, obj, opts...)
			},
			Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				return c.write("create", cl, obj, func() error { return cl.Create(ctx, obj, opts...) })
			},
			Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				return c.write("update", cl, obj, func() error { return cl.Update(ctx, obj, opts...) })
			},
			Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				return c.write("patch", cl, obj, func() error { return cl.Patch(ctx, obj, patch, opts...) })
			},
			Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				return c.write("delete", cl, obj, func() error { return cl.Delete(ctx, obj, opts...) })
			},
			SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				return c.write("update "+sub, cl, obj, func() error { return cl.SubResource(sub).Update(ctx, obj, opts...) })
			},
			SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				return c.write("patch "+sub, cl, obj, func() error { return cl.SubResource(sub).Patch(ctx, obj, patch, opts...) })
			},
		}).Build()
	return c
}

// key names obj as the recorded writes do: "Kind/name".
func (c *cluster) key(cl client.Client, obj client.Object, name string) string {
	gvk, err := cl.GroupVersionKindFor(obj)
	if err != nil {
		return "?/" + name
	}
	return gvk.Kind + "/" + name
}

func (c *cluster) failure(verb string, cl client.Client, obj client.Object, name string) error {
	return c.fail[verb+" "+c.key(cl, obj, name)]
}

// write fails as asked, or makes the write and records it when it took.
func (c *cluster) write(verb string, cl client.Client, obj client.Object, do func() error) error {
	if err := c.failure(verb, cl, obj, obj.GetName()); err != nil {
		return err
	}
	err := do()
	if err == nil {
		c.writes = append(c.writes, verb+" "+c.key(cl, obj, obj.GetName()))
	}
	return err
}

// writesTo are the recorded writes to objects of kind.
func (c *cluster) writesTo(kind string) []string {
	var w []string
	for _, s := range c.writes {
		if strings.Contains(s, " "+kind+"/") {
			w = append(w, s)
		}
	}
	return w
}

// secret returns the Secret name in the test namespace, or nil.
func (c *cluster) secret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, s)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}
