package metrics

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func pod(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestDecodeAgentOutput decodes what the agent's /metrics/resource writes (its golden
// file), so the two ends are checked against each other.
func TestDecodeAgentOutput(t *testing.T) {
	f, err := os.Open("../agent/stats/testdata/resource.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := DecodeResourceMetrics(f, "n1", t0)
	if err != nil {
		t.Fatal(err)
	}
	read := time.UnixMilli(1777896000250)
	want := &Batch{
		Nodes: map[string]Point{"n1": {Timestamp: read, CPU: 93e9, Memory: 251658240}},
		Pods: map[types.NamespacedName]map[string]Point{
			pod("default", "web"):     {"app": {Timestamp: read, StartTime: time.Unix(1777892490, 249999762), CPU: 59.5e9, Memory: 82837504}},
			pod("kube-system", "dns"): {"dns": {Timestamp: read, StartTime: time.Unix(1777892400, 249999762), CPU: 1.4e9, Memory: 11534336}},
		},
	}
	// Start times travel as float seconds: compare them to the millisecond.
	opt := cmp.Comparer(func(a, b time.Time) bool { d := a.Sub(b); return d < time.Millisecond && d > -time.Millisecond })
	if diff := cmp.Diff(want, b, opt); diff != "" {
		t.Errorf("batch (-want +got):\n%s", diff)
	}
}

// TestDecodeKubeletShapes: samples without timestamps take the scrape's time, a
// container with CPU but no memory is left out, other families are ignored.
func TestDecodeKubeletShapes(t *testing.T) {
	text := `# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="a",namespace="ns",pod="p"} 2
container_cpu_usage_seconds_total{container="half",namespace="ns",pod="p"} 1
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="a",namespace="ns",pod="p"} 1024
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 10.5
# TYPE something_else gauge
something_else{x="y"} 3
`
	b, err := DecodeResourceMetrics(strings.NewReader(text), "n2", t0)
	if err != nil {
		t.Fatal(err)
	}
	want := &Batch{Nodes: map[string]Point{}, Pods: map[types.NamespacedName]map[string]Point{
		pod("ns", "p"): {"a": {Timestamp: t0, CPU: 2e9, Memory: 1024}},
	}}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("batch (-want +got) (a node without memory has no point):\n%s", diff)
	}
	if _, err := DecodeResourceMetrics(strings.NewReader("not { prometheus"), "n2", t0); err == nil {
		t.Error("garbage decoded without error")
	}
}

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prev, last Point
		want       Usage
		err        error
	}{
		{"busy loop at its 200m limit", Point{Timestamp: t0, CPU: 10e9}, Point{Timestamp: t0.Add(15 * time.Second), CPU: 13e9, Memory: 4096},
			Usage{CPU: 200e6, Memory: 4096, Timestamp: t0.Add(15 * time.Second), Window: 15 * time.Second}, nil},
		{"idle", Point{Timestamp: t0, CPU: 10e9}, Point{Timestamp: t0.Add(15 * time.Second), CPU: 10e9},
			Usage{Timestamp: t0.Add(15 * time.Second), Window: 15 * time.Second}, nil},
		{"uneven window", Point{Timestamp: t0, CPU: 0}, Point{Timestamp: t0.Add(14250 * time.Millisecond), CPU: 14250e6},
			Usage{CPU: 1e9, Timestamp: t0.Add(14250 * time.Millisecond), Window: 14250 * time.Millisecond}, nil},
		{"counter reset", Point{Timestamp: t0, CPU: 10e9}, Point{Timestamp: t0.Add(15 * time.Second), CPU: 1e6}, Usage{}, errCounterReset},
		{"no window", Point{Timestamp: t0, CPU: 1}, Point{Timestamp: t0, CPU: 2}, Usage{}, errNoWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Rate(tc.prev, tc.last)
			if err != tc.err {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

// batch builds a batch of node n1 and pod ns/p with containers given as name→point.
func batch(node Point, containers map[string]Point) *Batch {
	b := NewBatch()
	b.Nodes["n1"] = node
	if containers != nil {
		b.Pods[pod("ns", "p")] = containers
	}
	return b
}

func TestStore(t *testing.T) {
	start := t0.Add(-time.Hour)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	s := &Store{Resolution: 15 * time.Second}

	s.Add(batch(Point{Timestamp: at(0), CPU: 100e9}, map[string]Point{"a": {Timestamp: at(0), StartTime: start, CPU: 50e9, Memory: 1 << 20}}))
	if _, ok := s.Node("n1"); ok {
		t.Error("a node scraped once has usage")
	}
	if _, _, _, ok := s.Pod(pod("ns", "p")); ok {
		t.Error("a pod scraped once has usage")
	}

	s.Add(batch(Point{Timestamp: at(15), CPU: 115e9, Memory: 3 << 20},
		map[string]Point{"a": {Timestamp: at(15), StartTime: start, CPU: 53e9, Memory: 2 << 20}}))
	if u, ok := s.Node("n1"); !ok || u.CPU != 1e9 || u.Window != 15*time.Second || u.Memory != 3<<20 {
		t.Errorf("node usage %+v, %v; want 1 core over 15 s and 3 MiB", u, ok)
	}
	cs, ts, window, ok := s.Pod(pod("ns", "p"))
	if want := []ContainerUsage{{"a", Usage{CPU: 200e6, Memory: 2 << 20, Timestamp: at(15), Window: 15 * time.Second}}}; !ok || !cmp.Equal(cs, want) || !ts.Equal(at(15)) || window != 15*time.Second {
		t.Errorf("pod usage %+v %v %v %v; want %+v", cs, ts, window, ok, want)
	}

	// The same readings again (an agent answering from the same instant): the earlier
	// pair is kept.
	s.Add(batch(Point{Timestamp: at(15), CPU: 115e9, Memory: 3 << 20},
		map[string]Point{"a": {Timestamp: at(15), StartTime: start, CPU: 53e9, Memory: 2 << 20}}))
	if u, ok := s.Node("n1"); !ok || u.CPU != 1e9 {
		t.Errorf("after a repeated reading: node usage %+v, %v; want the previous rate", u, ok)
	}

	// A second container appears (fresh, 5 s old: too young to be measured from its
	// start): the pod is not reported until it has two readings too.
	s.Add(batch(Point{Timestamp: at(30), CPU: 130e9}, map[string]Point{
		"a": {Timestamp: at(30), StartTime: start, CPU: 56e9},
		"b": {Timestamp: at(30), StartTime: at(25), CPU: 1e9},
	}))
	if _, _, _, ok := s.Pod(pod("ns", "p")); ok {
		t.Error("a pod with a container read once is reported")
	}

	// a restarted (new start time, counter from zero): no usage for it, nor the pod.
	s.Add(batch(Point{Timestamp: at(45), CPU: 145e9}, map[string]Point{
		"a": {Timestamp: at(45), StartTime: at(40), CPU: 1e6},
		"b": {Timestamp: at(45), StartTime: at(25), CPU: 2e9},
	}))
	if _, _, _, ok := s.Pod(pod("ns", "p")); ok {
		t.Error("a pod whose container restarted between readings is reported")
	}

	// A container 12 s old at its first reading is measured from its start.
	s.Add(batch(Point{Timestamp: at(60), CPU: 160e9}, map[string]Point{"c": {Timestamp: at(60), StartTime: at(48), CPU: 6e9}}))
	cs, _, window, ok = s.Pod(pod("ns", "p"))
	if !ok || len(cs) != 1 || cs[0].CPU != 500e6 || window != 12*time.Second {
		t.Errorf("fresh container: %+v, window %v, %v; want 500m over 12 s", cs, window, ok)
	}

	// A node missing from a scrape loses its usage.
	s.Add(NewBatch())
	if _, ok := s.Node("n1"); ok {
		t.Error("a node missing from the last scrape still has usage")
	}
}

// lister is a Lister over fixed objects.
type lister []metav1.Object

func (l lister) List(ns string, sel labels.Selector) ([]metav1.Object, error) {
	var out []metav1.Object
	for _, o := range l {
		if (ns == "" || o.GetNamespace() == ns) && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (l lister) Get(ns, name string) (metav1.Object, error) {
	for _, o := range l {
		if o.GetNamespace() == ns && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(podsResource, name)
}

func meta(ns, name string, lbls map[string]string) metav1.Object {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

func TestAPI(t *testing.T) {
	s := &Store{Resolution: 15 * time.Second}
	mk := func(sec int, cpu uint64) *Batch {
		at := t0.Add(time.Duration(sec) * time.Second)
		b := NewBatch()
		b.Nodes["n1"] = Point{Timestamp: at, CPU: 10 * cpu, Memory: 512 << 20}
		b.Pods[pod("a", "busy")] = map[string]Point{"c": {Timestamp: at, CPU: cpu, Memory: 1 << 20}}
		b.Pods[pod("a", "idle")] = map[string]Point{"c": {Timestamp: at, CPU: 1e9, Memory: 2 << 20}, "side": {Timestamp: at, CPU: 0, Memory: 4 << 20}}
		b.Pods[pod("b", "busy")] = map[string]Point{"c": {Timestamp: at, CPU: cpu, Memory: 1 << 20}}
		return b
	}
	s.Add(mk(0, 0))
	s.Add(mk(15, 3e9))
	api := &API{Store: s, Now: func() time.Time { return t0.Add(time.Minute) },
		Nodes: lister{meta("", "n1", map[string]string{"zone": "a"}), meta("", "n2", nil)},
		Pods:  lister{meta("a", "busy", map[string]string{"app": "busy"}), meta("a", "idle", map[string]string{"app": "idle"}), meta("b", "busy", map[string]string{"app": "busy"}), meta("a", "pending", nil)},
	}

	pm, err := api.PodMetrics("a", "busy")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pm.Containers[0].Usage.Cpu().String(), "200m"; got != want {
		t.Errorf("busy CPU %s, want %s", got, want)
	}
	if pm.Kind != "PodMetrics" || pm.APIVersion != "metrics.k8s.io/v1beta1" || pm.Labels["app"] != "busy" || pm.Window.Duration != 15*time.Second {
		t.Errorf("pod metrics %+v: want kind, apiVersion, the pod's labels and a 15 s window", pm)
	}
	if _, err := api.PodMetrics("a", "pending"); !apierrors.IsNotFound(err) {
		t.Errorf("a pod without readings: %v, want NotFound", err)
	}
	if _, err := api.PodMetrics("a", "nope"); !apierrors.IsNotFound(err) {
		t.Errorf("a pod that does not exist: %v, want NotFound", err)
	}

	// podNames lists the pods a query answers, as ns/name:containers.
	podNames := func(ns, lsel, fsel string) []string {
		q, err := ParseQuery(lsel, fsel)
		if err != nil {
			t.Fatal(err)
		}
		l, err := api.ListPodMetrics(ns, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range l.Items {
			out = append(out, m.Namespace+"/"+m.Name+":"+strconv.Itoa(len(m.Containers)))
		}
		return out
	}
	for _, tc := range []struct {
		ns, labels, fields string
		want               []string
	}{
		{"", "", "", []string{"a/busy:1", "a/idle:2", "b/busy:1"}},
		{"a", "", "", []string{"a/busy:1", "a/idle:2"}},
		{"", "app=busy", "", []string{"a/busy:1", "b/busy:1"}},
		{"a", "app in (idle)", "", []string{"a/idle:2"}},
		{"", "", "metadata.namespace=b", []string{"b/busy:1"}},
		{"", "", "metadata.name!=busy", []string{"a/idle:2"}},
	} {
		if got := podNames(tc.ns, tc.labels, tc.fields); !cmp.Equal(got, tc.want) {
			t.Errorf("pods ns=%q labels=%q fields=%q: %v, want %v", tc.ns, tc.labels, tc.fields, got, tc.want)
		}
	}
	if _, err := ParseQuery("app in (", ""); !apierrors.IsBadRequest(err) {
		t.Errorf("a bad label selector: %v, want BadRequest", err)
	}

	nl, err := api.ListNodeMetrics(Query{Labels: labels.Everything()})
	if err != nil {
		t.Fatal(err)
	}
	if len(nl.Items) != 1 || nl.Items[0].Name != "n1" || nl.Items[0].Usage.Cpu().String() != "2" || nl.Items[0].Usage.Memory().String() != "512Mi" {
		t.Errorf("node metrics %+v: want n1 only (n2 has no readings), 2 cores, 512Mi", nl.Items)
	}
	if _, err := api.NodeMetrics("n2"); !apierrors.IsNotFound(err) {
		t.Errorf("a node without readings: %v, want NotFound", err)
	}
}

// TestScrape scrapes a node agent stand-in over TLS on loopback.
func TestScrape(t *testing.T) {
	body, err := os.ReadFile("../agent/stats/testdata/resource.txt")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics/resource" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	defer ts.Close()
	host, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	node := func(name, addr string, port int) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if addr != "" {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "ignored"}, {Type: v1.NodeInternalIP, Address: addr}}
		}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		return n
	}
	store := &Store{Resolution: 15 * time.Second}
	s := &Scraper{Client: ts.Client(), Store: store, Timeout: time.Second,
		Nodes: func() ([]*v1.Node, error) {
			return []*v1.Node{node("n1", host, p), node("noaddr", "", 0)}, nil
		}}
	s.Scrape(context.Background())
	store.mu.RLock()
	defer store.mu.RUnlock()
	if _, ok := store.lastNodes["n1"]; !ok || len(store.lastPods) != 2 {
		t.Errorf("after a scrape: nodes %v, pods %v; want n1 and two pods", store.lastNodes, store.lastPods)
	}
}
