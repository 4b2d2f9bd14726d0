package relayconfig

import (
	"context"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
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
	written *sync.Map // RelayConfig UID → the resourceVersion its last status update made
}

func newQuietStatusManager(mgr manager.Manager) quietStatusManager {
	return quietStatusManager{Manager: mgr, written: &sync.Map{}}
}

func (m quietStatusManager) GetClient() client.Client {
	return quietStatusClient{Client: m.Manager.GetClient(), written: m.written}
}

type quietStatusClient struct {
	client.Client
	written *sync.Map
}

func (c quietStatusClient) Status() client.SubResourceWriter {
	return quietStatusWriter{SubResourceWriter: c.Client.Status(), read: c.Client, written: c.written}
}

type quietStatusWriter struct {
	client.SubResourceWriter
	read    client.Reader
	written *sync.Map
}

// Update skips a RelayConfig whose status is what the version it was read
// at already holds: same resourceVersion as the cache, same status, and
// not older than what this writer last wrote (a cache that has not caught
// up with our own last write would hide it; the update is then sent, and
// fails on the resourceVersion). Were the stored object newer, the update
// would fail on the resourceVersion anyway.
func (w quietStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	rc, ok := obj.(*v1alpha1.RelayConfig)
	if !ok || len(opts) > 0 {
		return w.SubResourceWriter.Update(ctx, obj, opts...)
	}
	cur := &v1alpha1.RelayConfig{}
	last, wrote := w.written.Load(rc.GetUID())
	if err := w.read.Get(ctx, client.ObjectKeyFromObject(rc), cur); err == nil &&
		cur.ResourceVersion == rc.ResourceVersion && (!wrote || last == rc.ResourceVersion) &&
		equality.Semantic.DeepEqual(cur.Status, rc.Status) {
		return nil
	}
	if err := w.SubResourceWriter.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if meta.WasDeleted(rc) {
		// Going: the managed reconciler writes its status while it deletes,
		// and forgets it here.
		w.written.Delete(rc.GetUID())
		return nil
	}
	w.written.Store(rc.GetUID(), rc.GetResourceVersion())
	return nil
}
