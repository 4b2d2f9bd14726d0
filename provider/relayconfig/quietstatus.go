package relayconfig

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// quietStatusManager gives the managed reconciler a client that does not
// send the status update every reconcile ends with when it would change
// nothing (doc.go, deviation 6). The API server answers such an update
// without a new resourceVersion or a watch event, but it is still a write
// request, one per RelayConfig per poll at rest; crossplane-runtime has no
// option to skip it.
type quietStatusManager struct {
	manager.Manager
}

func (m quietStatusManager) GetClient() client.Client {
	return quietStatusClient{Client: m.Manager.GetClient()}
}

type quietStatusClient struct {
	client.Client
}

func (c quietStatusClient) Status() client.SubResourceWriter {
	return quietStatusWriter{SubResourceWriter: c.Client.Status(), read: c.Client}
}

type quietStatusWriter struct {
	client.SubResourceWriter
	read client.Reader
}

// Update skips a RelayConfig whose status is what the version it was read
// at already holds: same resourceVersion, same status. Were the stored
// object newer, the update would fail on the resourceVersion anyway.
func (w quietStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if rc, ok := obj.(*v1alpha1.RelayConfig); ok && len(opts) == 0 {
		cur := &v1alpha1.RelayConfig{}
		if err := w.read.Get(ctx, client.ObjectKeyFromObject(rc), cur); err == nil &&
			cur.ResourceVersion == rc.ResourceVersion && equality.Semantic.DeepEqual(cur.Status, rc.Status) {
			return nil
		}
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}
