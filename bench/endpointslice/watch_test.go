package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/tranche/tranche/internal/controller/endpointslice"
)

// sliceWatch follows the controller's EndpointSlices in all namespaces through a watch,
// as a proxy would: how many of each Service's endpoints are ready, how many Services
// are complete (all their pods ready in their slices), and each pod's ready condition,
// with waiters told the moment a pod's condition turns to what they wait for.
type sliceWatch struct {
	want int // ready endpoints that make a Service complete

	mu       sync.Mutex
	slices   map[string]sliceState // slice namespace/name → what it holds
	ready    map[string]int        // Service namespace/name → ready endpoints over its slices
	complete int                   // Services whose ready count is want
	pods     map[string]bool       // pod namespace/name → ready in its slice
	waiters  map[string]waiter     // pod namespace/name → who waits for which condition
	changed  time.Time             // arrival of the event that last changed complete
	onChange chan struct{}         // closed and replaced when complete changes
	err      error                 // why the watch ended early
}

type sliceState struct {
	service string
	ready   int
	pods    []string
}

// waiter is told (with the time the event arrived) when a pod's ready condition in
// its slice becomes ready.
type waiter struct {
	ready bool
	seen  chan time.Time
}

// watchSlices lists the managed slices of all namespaces, then follows them from the
// list's resourceVersion until ctx ends. A Service is complete when want of its
// endpoints are ready.
func watchSlices(ctx context.Context, cs kubernetes.Interface, want int) (*sliceWatch, error) {
	sel := discovery.LabelManagedBy + "=" + endpointslice.ControllerName
	api := cs.DiscoveryV1().EndpointSlices("")
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices: %w", err)
	}
	w := &sliceWatch{want: want, slices: map[string]sliceState{}, ready: map[string]int{}, pods: map[string]bool{},
		waiters: map[string]waiter{}, onChange: make(chan struct{})}
	for i := range list.Items {
		w.apply(watch.Added, &list.Items[i], time.Now())
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = sel
			return api.Watch(ctx, opts)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch EndpointSlices: %w", err)
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-rw.Done():
				w.fail(errors.New("watch of EndpointSlices ended"))
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					w.fail(errors.New("watch of EndpointSlices ended"))
					return
				}
				now := time.Now()
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					if s, ok := ev.Object.(*discovery.EndpointSlice); ok {
						w.apply(ev.Type, s, now)
					}
				case watch.Error:
					w.fail(fmt.Errorf("watch of EndpointSlices: %v", ev.Object))
					return
				}
			}
		}
	}()
	return w, nil
}

// apply records one slice event that arrived at now.
func (w *sliceWatch) apply(typ watch.EventType, s *discovery.EndpointSlice, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	svc := s.Namespace + "/" + s.Labels[discovery.LabelServiceName]
	key := s.Namespace + "/" + s.Name
	if old, ok := w.slices[key]; ok {
		w.addReady(old.service, -old.ready, now)
		for _, p := range old.pods {
			delete(w.pods, p)
		}
		delete(w.slices, key)
	}
	if typ == watch.Deleted {
		return
	}
	st := sliceState{service: svc}
	for _, ep := range s.Endpoints {
		ready := ep.Conditions.Ready != nil && *ep.Conditions.Ready
		if ready {
			st.ready++
		}
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			continue
		}
		name := ep.TargetRef.Namespace + "/" + ep.TargetRef.Name
		st.pods = append(st.pods, name)
		w.pods[name] = ready
		if wt, ok := w.waiters[name]; ok && wt.ready == ready {
			wt.seen <- now
			delete(w.waiters, name)
		}
	}
	w.slices[key] = st
	w.addReady(svc, st.ready, now)
}

// addReady adds n to svc's ready count and keeps the complete count in step.
func (w *sliceWatch) addReady(svc string, n int, now time.Time) {
	if n == 0 {
		return
	}
	before := w.ready[svc] == w.want
	w.ready[svc] += n
	if w.ready[svc] == 0 {
		delete(w.ready, svc)
	}
	after := w.ready[svc] == w.want
	if before != after {
		if after {
			w.complete++
		} else {
			w.complete--
		}
		w.changed = now
		close(w.onChange)
		w.onChange = make(chan struct{})
	}
}

func (w *sliceWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	close(w.onChange)
	w.onChange = make(chan struct{})
}

// progress returns the complete Services, the pods seen, and why the watch failed.
func (w *sliceWatch) progress() (complete, pods int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.complete, len(w.pods), w.err
}

// waitComplete waits until n Services are complete and returns the arrival time of
// the event that completed the last one.
func (w *sliceWatch) waitComplete(ctx context.Context, n int) (time.Time, error) {
	for {
		w.mu.Lock()
		complete, changed, err, ch := w.complete, w.changed, w.err, w.onChange
		w.mu.Unlock()
		if err != nil {
			return time.Time{}, err
		}
		if complete >= n {
			return changed, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d Services complete: %w", complete, n, context.Cause(ctx))
		case <-ch:
		}
	}
}

// expect registers interest in pod (namespace/name) turning to ready (true) or not ready (false) in its
// slice; the channel gets the arrival time of the event that shows it. Register before
// writing the pod, so the event cannot be missed.
func (w *sliceWatch) expect(pod string, ready bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiters[pod] = waiter{ready: ready, seen: ch}
	return ch
}

// forget drops pod's waiter after a timeout.
func (w *sliceWatch) forget(pod string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiters, pod)
}

// isReady returns pod's (namespace/name) ready condition in its slice, and whether it is in a slice.
func (w *sliceWatch) isReady(pod string) (ready, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ready, ok = w.pods[pod]
	return ready, ok
}
