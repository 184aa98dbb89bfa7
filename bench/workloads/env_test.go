package workloads

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/bench/benchcluster"
)

// cluster is one `tranche up --detach` of the benchmark, on its own data directory,
// listen address and network namespace prefix.
type cluster struct {
	bin, dataDir string
	client       kubernetes.Interface
}

// startCluster runs `tranche up --nodes nodes` and takes it down when b ends, also when
// it fails.
func startCluster(b *testing.B, nodes int) *cluster {
	b.Helper()
	up := benchcluster.Start(b, benchcluster.NeedRoot(b, "bench/workloads"), "tb", nodes, "--log-level", "warn")
	c := &cluster{bin: up.Bin, dataDir: up.Dir}
	cfg, err := clientcmd.BuildConfigFromFlags("", up.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	// The benchmark's own requests must not be throttled by client-go.
	cfg.QPS, cfg.Burst = 1000, 1000
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		b.Fatal(err)
	}
	return c
}

// namespace creates a namespace for one measurement.
func (c *cluster) namespace(b *testing.B, name string) string {
	b.Helper()
	_, err := c.client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount.
	waitFor(b, 30*time.Second, "default ServiceAccount in "+name, func() bool {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil
	})
	return name
}

// waitFor polls cond every 50 ms until it holds, failing b after timeout.
func waitFor(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// observer watches a namespace's pods, events and workload objects from a given
// resource version on, and records when each pod first turned Ready and how many
// writes (watch events: creates, updates and deletes that changed an object) each kind
// received.
type observer struct {
	mu      sync.Mutex
	readyAt map[string]time.Time // pod name -> first seen Ready
	nodeOf  map[string]string    // pod name -> spec.nodeName
	addedAt map[string]time.Time // pod name -> seen created
	boundAt map[string]time.Time // pod name -> first seen with a node
	nodeAt  map[string]time.Time // node name -> first seen Ready
	writes  map[string]int       // kind -> watch events
	last    time.Time            // time of the last event of any kind
	cancel  context.CancelFunc
	done    sync.WaitGroup
	errs    chan error
}

// observe starts the watches of ns. Each starts at the resource version of a list made
// now, so objects that exist already are not counted as written.
func (c *cluster) observe(b *testing.B, ns string) *observer {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{readyAt: map[string]time.Time{}, nodeOf: map[string]string{}, nodeAt: map[string]time.Time{}, addedAt: map[string]time.Time{}, boundAt: map[string]time.Time{}, writes: map[string]int{}, cancel: cancel, errs: make(chan error, 8)}
	type lister func(context.Context, metav1.ListOptions) (string, error)
	type watcher func(context.Context, metav1.ListOptions) (watch.Interface, error)
	rv := func(l metav1.ListInterface, err error) (string, error) {
		if err != nil {
			return "", err
		}
		return l.GetResourceVersion(), nil
	}
	kinds := []struct {
		kind  string
		list  lister
		watch watcher
	}{
		{"pods", func(ctx context.Context, o metav1.ListOptions) (string, error) {
			return rv(c.client.CoreV1().Pods(ns).List(ctx, o))
		}, c.client.CoreV1().Pods(ns).Watch},
		{"events", func(ctx context.Context, o metav1.ListOptions) (string, error) {
			return rv(c.client.CoreV1().Events(ns).List(ctx, o))
		}, c.client.CoreV1().Events(ns).Watch},
		{"replicasets", func(ctx context.Context, o metav1.ListOptions) (string, error) {
			return rv(c.client.AppsV1().ReplicaSets(ns).List(ctx, o))
		}, c.client.AppsV1().ReplicaSets(ns).Watch},
		{"deployments", func(ctx context.Context, o metav1.ListOptions) (string, error) {
			return rv(c.client.AppsV1().Deployments(ns).List(ctx, o))
		}, c.client.AppsV1().Deployments(ns).Watch},
		{"daemonsets", func(ctx context.Context, o metav1.ListOptions) (string, error) {
			return rv(c.client.AppsV1().DaemonSets(ns).List(ctx, o))
		}, c.client.AppsV1().DaemonSets(ns).Watch},
		// Nodes only for the time they turn Ready; their heartbeats are not counted.
		{"nodes", func(ctx context.Context, o metav1.ListOptions) (string, error) {
			return rv(c.client.CoreV1().Nodes().List(ctx, o))
		}, c.client.CoreV1().Nodes().Watch},
	}
	for _, k := range kinds {
		from, err := k.list(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatalf("listing %s: %v", k.kind, err)
		}
		w, err := k.watch(ctx, metav1.ListOptions{ResourceVersion: from, AllowWatchBookmarks: false})
		if err != nil {
			b.Fatalf("watching %s: %v", k.kind, err)
		}
		o.done.Add(1)
		go func() {
			defer o.done.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						if ctx.Err() == nil {
							o.errs <- fmt.Errorf("the watch of %s closed early", k.kind)
						}
						return
					}
					o.record(k.kind, ev)
				}
			}
		}()
	}
	b.Cleanup(o.stop)
	return o
}

func (o *observer) record(kind string, ev watch.Event) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
	default:
		return
	}
	if node, ok := ev.Object.(*v1.Node); ok {
		if _, seen := o.nodeAt[node.Name]; !seen && nodeReady(node) {
			o.nodeAt[node.Name] = now
		}
		return
	}
	o.writes[kind]++
	o.last = now
	pod, ok := ev.Object.(*v1.Pod)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	o.nodeOf[pod.Name] = pod.Spec.NodeName
	if _, seen := o.addedAt[pod.Name]; !seen {
		o.addedAt[pod.Name] = now
	}
	if _, seen := o.boundAt[pod.Name]; !seen && pod.Spec.NodeName != "" {
		o.boundAt[pod.Name] = now
	}
	if _, seen := o.readyAt[pod.Name]; !seen && podReady(pod) {
		o.readyAt[pod.Name] = now
	}
}

func (o *observer) stop() {
	o.cancel()
	o.done.Wait()
}

// check fails b if a watch ended early.
func (o *observer) check(b *testing.B) {
	b.Helper()
	select {
	case err := <-o.errs:
		b.Fatal(err)
	default:
	}
}

// ready returns how many pods were seen Ready and the latest of those times.
func (o *observer) ready() (int, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var last time.Time
	for _, t := range o.readyAt {
		if t.After(last) {
			last = t
		}
	}
	return len(o.readyAt), last
}

// times returns the times of the named pod; zero times for what was not seen.
func (o *observer) times(name string) podTimes {
	o.mu.Lock()
	defer o.mu.Unlock()
	return podTimes{added: o.addedAt[name], bound: o.boundAt[name], ready: o.readyAt[name]}
}

// podTimes are when a pod was seen created, bound to a node and Ready.
type podTimes struct{ added, bound, ready time.Time }

// readyOn returns the times of the first pod bound to node that was seen Ready.
func (o *observer) readyOn(node string) (podTimes, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, t := range o.readyAt {
		if o.nodeOf[name] == node {
			return podTimes{added: o.addedAt[name], bound: o.boundAt[name], ready: t}, true
		}
	}
	return podTimes{}, false
}

// settle waits until no write was observed for quiet (the controllers' last status
// writes follow the last pod turning Ready), within timeout, and returns the counts.
func (o *observer) settle(b *testing.B, quiet, timeout time.Duration) map[string]int {
	b.Helper()
	waitFor(b, timeout, "writes to settle", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return time.Since(o.last) >= quiet
	})
	o.check(b)
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for k, v := range o.writes {
		out[k] = v
	}
	return out
}

// nodeReadyAt returns when node was first seen Ready.
func (o *observer) nodeReadyAt(node string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.nodeAt[node]
	return t, ok
}

func nodeReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// writeSummary is "pods 900, events 301, ..." in a fixed order.
func writeSummary(w map[string]int) string {
	var parts []string
	for _, k := range []string{"pods", "events", "replicasets", "deployments", "daemonsets"} {
		if w[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, w[k]))
		}
	}
	return strings.Join(parts, ", ")
}
