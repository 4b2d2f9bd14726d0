package relayconfig

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// statusKeepingFinalizer adds and removes the managed reconciler's
// finalizer as crossplane-runtime's APIFinalizer does, and keeps what
// Observe put into the RelayConfig's status across the write (doc.go,
// deviation 3): the Update that adds it loads the stored object back,
// status included.
type statusKeepingFinalizer struct {
	resource.Finalizer
}

func (f statusKeepingFinalizer) AddFinalizer(ctx context.Context, obj resource.Object) error {
	rc, ok := obj.(*v1alpha1.RelayConfig)
	if !ok {
		return f.Finalizer.AddFinalizer(ctx, obj)
	}
	observed := rc.Status.DeepCopy()
	err := f.Finalizer.AddFinalizer(ctx, obj)
	rc.Status = *observed
	return err
}
