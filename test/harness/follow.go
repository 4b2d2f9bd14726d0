package harness

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	toolswatch "k8s.io/client-go/tools/watch"
)

// Follow hands handle every object lw lists, as an Added event, then every
// change after that list, until ctx ends: a controller's loop without its
// cache. A watch the API server ends is resumed from the last version seen
// (client-go's RetryWatcher); one too old to resume, or a list that fails
// (a CRD not there yet), starts again from a new list, so nothing is
// missed, though an object may be handed over again. synced, when set, is
// called after each list has been handed over: from then on no change is
// missed.
func Follow(ctx context.Context, lw cache.ListerWatcherWithContext, handle func(watch.Event), synced func()) {
	for ctx.Err() == nil {
		rv, err := handList(ctx, lw, handle)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if synced != nil {
			synced()
		}
		w, err := toolswatch.NewRetryWatcherWithContext(ctx, rv, lw)
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break // too old: list again
			}
			handle(ev)
		}
		w.Stop()
	}
}

// handList lists with lw, hands every item over and returns the list's
// resource version.
func handList(ctx context.Context, lw cache.ListerWatcherWithContext, handle func(watch.Event)) (string, error) {
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return "", err
	}
	for _, o := range items {
		handle(watch.Event{Type: watch.Added, Object: o})
	}
	acc, err := meta.ListAccessor(list)
	if err != nil {
		return "", err
	}
	return acc.GetResourceVersion(), nil
}

// ListWatch lists and watches with a dynamic client's resource (in one
// namespace or all), for Follow.
func ListWatch(ri dynamic.ResourceInterface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		},
	}
}
