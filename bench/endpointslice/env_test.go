package endpointslice

import (
	"context"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/bench/benchreport"
	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/storage/embedded"
	"github.com/tranche/tranche/internal/storage/etcd"
)

// namespaces is how many namespaces share the Services (and their pods) evenly. The
// default keeps 2,000 pods per namespace, within Kubernetes' scalability threshold of
// 3,000 pods per namespace; -namespaces 1 puts all 100,000 pods in one namespace, which
// costs the controller a scan of all of them per Service sync.
var namespaces = flag.Int("namespaces", 50, "namespaces the 1,000 Services and their pods are spread over (a divisor of 1000)")

const (
	// nsPrefix names the namespaces holding the Services and pods.
	nsPrefix = "bench-es-"
	// services and podsPerService size the cluster: each Service selects its own 100
	// pods, which fit in one slice (the controller's default is 100 per slice).
	services       = 1000
	podsPerService = 100
	// nodeCount fake Nodes carry the pods; the controller needs a pod's Node in its
	// cache (for the zone) before it lists the pod as an endpoint. No agent runs them.
	nodeCount = 50
	// loaders is how many clients create the objects in parallel.
	loaders = 16
	// controllerWorkers, controllerQPS and controllerBurst are what `tranche server`
	// gives the controller (internal/server/controllers.go and server.go's loopback
	// client config).
	controllerWorkers = 4
	controllerQPS     = 200
	controllerBurst   = 400
	// closeTimeout bounds each step of the environment's shutdown, loadTimeout the
	// whole set-up.
	closeTimeout = 30 * time.Second
	loadTimeout  = 15 * time.Minute
)

// env is an embedded etcd and the API handler `tranche server` serves (every resource,
// with the ClusterIP/NodePort allocator, without authentication), on loopback over TLS
// with HTTP/2. The controller under test runs in the same process, as in tranche server.
type env struct {
	// parent is the top-level benchmark: what runs across sub-benchmarks (the
	// controller) is stopped when it ends.
	parent     *testing.B
	base       *rest.Config
	rp         *report
	namespaces int

	loadOnce sync.Once
	loadErr  error

	syncOnce sync.Once
	syncErr  error
	first    firstSync
	watch    *sliceWatch
	writes   *writeCounter
}

// newEnv starts the environment and stops it when b's test ends. Shutdown order
// matters (a previous attempt hung in it): whoever started the controller stops it and
// waits for its informers first (registered later, so run earlier), then the API
// handler's own watches are ended so the HTTP server has no open request to wait for,
// then the connections, the HTTP server and etcd are closed, each step with a timeout.
// The data directory is short on purpose: etcd's unix socket path must fit in 108 bytes.
func newEnv(b *testing.B, rp *report) *env {
	b.Helper()
	if *namespaces < 1 || services%*namespaces != 0 {
		b.Fatalf("-namespaces %d: want a divisor of %d (the Services are spread evenly)", *namespaces, services)
	}
	dir, err := os.MkdirTemp("", "tres-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	etcdSrv, err := embedded.Start(ctx, embedded.Config{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeWithin(b, "embedded etcd", func() { etcdSrv.Close() }) })
	store := etcd.New(etcdSrv.Client())
	alloc := &allocator.Services{
		CIDR:     netip.MustParsePrefix("10.96.0.0/12"),
		Ports:    allocator.PortRange{First: 30000, Last: 32767},
		Store:    store,
		Reserved: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
	}
	api, err := apiserver.New(apiserver.Config{Storage: store, Resources: all.Resources(), Admitters: []apiserver.Admitter{alloc}})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(api)
	hs.EnableHTTP2 = true
	hs.StartTLS()
	b.Cleanup(func() {
		api.Close()
		hs.CloseClientConnections()
		closeWithin(b, "API server", hs.Close)
	})
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	base := &rest.Config{
		Host:            hs.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		// A negative QPS turns client-go's rate limiter off for set-up and observers;
		// the controller gets tranche server's limits. No Timeout: it would cut watches
		// (tranche server's own client has none either); contexts bound every call.
		QPS: -1,
	}
	return &env{parent: b, base: base, rp: rp, namespaces: *namespaces}
}

// closeWithin runs stop and fails b if it has not returned after closeTimeout, instead
// of hanging the benchmark.
func closeWithin(b *testing.B, what string, stop func()) {
	done := make(chan struct{})
	go func() {
		stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeTimeout):
		b.Errorf("closing %s did not finish within %s", what, closeTimeout)
	}
}

// config returns a copy of the base config with a connection of its own (client-go
// would otherwise share one cached transport between equal configs), then applies
// mutate.
func (e *env) config(mutate func(*rest.Config)) *rest.Config {
	cfg := rest.CopyConfig(e.base)
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = dialer.DialContext
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

// client returns a clientset with its own connection and no rate limit.
func (e *env) client(b *testing.B) *kubernetes.Clientset {
	b.Helper()
	cs, err := kubernetes.NewForConfig(e.config(nil))
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// clients returns n clientsets, each with its own connection.
func (e *env) clients(b *testing.B, n int) []*kubernetes.Clientset {
	b.Helper()
	out := make([]*kubernetes.Clientset, n)
	for i := range out {
		out[i] = e.client(b)
	}
	return out
}

// writeCounter counts the EndpointSlice writes (POST, PUT, PATCH, DELETE) a client
// sends, by method, and those the server refused or that failed in transit.
type writeCounter struct {
	creates, updates, patches, deletes, failed atomic.Int64
}

// wrap is a rest.Config WrapTransport.
func (c *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, c} }

// total is every write sent, accepted or not.
func (c *writeCounter) total() int64 {
	return c.creates.Load() + c.updates.Load() + c.patches.Load() + c.deletes.Load()
}

func (c *writeCounter) String() string {
	return fmt.Sprintf("%d creates, %d updates, %d patches, %d deletes (%d refused or failed)",
		c.creates.Load(), c.updates.Load(), c.patches.Load(), c.deletes.Load(), c.failed.Load())
}

type countingTransport struct {
	next http.RoundTripper
	c    *writeCounter
}

// WrappedRoundTripper lets client-go reach the transport underneath to cancel requests.
func (t countingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if !strings.Contains(req.URL.Path, "/endpointslices") {
		return resp, err
	}
	switch req.Method {
	case http.MethodPost:
		t.c.creates.Add(1)
	case http.MethodPut:
		t.c.updates.Add(1)
	case http.MethodPatch:
		t.c.patches.Add(1)
	case http.MethodDelete:
		t.c.deletes.Add(1)
	default:
		return resp, err
	}
	if err != nil || resp.StatusCode >= 300 {
		t.c.failed.Add(1)
	}
	return resp, err
}

// load creates the namespace, the Nodes, the Services and their pods through the API,
// each pod then given a Running, Ready status with its own IP through UpdateStatus, as
// a node agent would. It runs once per env; the time it took is a note in the report.
func (e *env) load(b *testing.B) error {
	b.Helper()
	e.loadOnce.Do(func() { e.loadErr = e.doLoad(b) })
	return e.loadErr
}

func (e *env) doLoad(b *testing.B) error {
	ctx, cancel := context.WithTimeoutCause(context.Background(), loadTimeout, fmt.Errorf("set-up not done after %s", loadTimeout))
	defer cancel()
	cls := e.clients(b, loaders)
	start := time.Now()
	nss := []string{peerNamespace, floorNamespace}
	for k := range e.namespaces {
		nss = append(nss, nsPrefix+fmt.Sprintf("%02d", k))
	}
	for _, ns := range nss {
		if _, err := cls[0].CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	if _, err := benchreport.Parallel(ctx, cls, nodeCount, func(ctx context.Context, cs *kubernetes.Clientset, i int) error {
		if _, err := cs.CoreV1().Nodes().Create(ctx, makeNode(i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", nodeName(i), err)
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := benchreport.Parallel(ctx, cls, services, func(ctx context.Context, cs *kubernetes.Clientset, i int) error {
		ns := e.serviceNamespace(i)
		if _, err := cs.CoreV1().Services(ns).Create(ctx, makeService(ns, i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create service %s/%s: %w", ns, serviceName(i), err)
		}
		return nil
	}); err != nil {
		return err
	}
	podStart := time.Now()
	var loaded atomic.Int64
	stopProgress := progress(podStart, func() string {
		return fmt.Sprintf("set-up: %d of %d pods created and running", loaded.Load(), services*podsPerService)
	})
	defer stopProgress()
	n, err := benchreport.Parallel(ctx, cls, services*podsPerService, func(ctx context.Context, cs *kubernetes.Clientset, i int) error {
		ns := e.podNamespace(i)
		pod, err := cs.CoreV1().Pods(ns).Create(ctx, makePod(ns, i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s/%s: %w", ns, podName(i), err)
		}
		setRunning(pod, i, true)
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status of pod %s/%s: %w", ns, podName(i), err)
		}
		loaded.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	podTime := time.Since(podStart)
	e.rp.Note("set-up: %d Nodes, %d Services and %d pods in %d namespaces (create + UpdateStatus each) written through the API by %d clients in %s; pods at %.0f/s (%.0f writes/s)",
		nodeCount, services, n, e.namespaces, loaders, ms(time.Since(start)), float64(n)/podTime.Seconds(), 2*float64(n)/podTime.Seconds())
	return nil
}

// serviceNamespace is where Service s lives: consecutive Services share a namespace.
func (e *env) serviceNamespace(s int) string {
	return fmt.Sprintf("%s%02d", nsPrefix, s/(services/e.namespaces))
}

// podNamespace is where pod i lives: with its Service.
func (e *env) podNamespace(i int) string { return e.serviceNamespace(i / podsPerService) }

func serviceName(s int) string { return fmt.Sprintf("svc-%04d", s) }
func nodeName(i int) string    { return fmt.Sprintf("node-%02d", i) }

// podName is pod i's name: its Service's number and its index there.
func podName(i int) string {
	return fmt.Sprintf("svc-%04d-%02d", i/podsPerService, i%podsPerService)
}

// podIP gives pod i a unique address in 10.64.0.0/10.
func podIP(i int) string {
	return netip.AddrFrom4([4]byte{10, 64 + byte(i>>16), byte(i >> 8), byte(i)}).String()
}

// makeNode builds a Node spread over three zones (endpoints carry the zone).
func makeNode(i int) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{
			v1.LabelHostname: nodeName(i), v1.LabelTopologyZone: string(rune('a' + i%3)),
		}},
	}
}

// makeService builds Service s, selecting its own pods, with a named target port that
// the controller resolves per pod, as a Deployment's Service usually has.
func makeService(ns string, s int) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: serviceName(s)},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": serviceName(s)},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: v1.ProtocolTCP}},
		},
	}
}

// makePod builds pod i of Service i/podsPerService on one of the fake Nodes.
func makePod(ns string, i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName(i), Labels: map[string]string{
			"app": serviceName(i / podsPerService), "pod-template-hash": "7d4b9c8f6d",
		}},
		Spec: v1.PodSpec{
			NodeName: nodeName(i % nodeCount),
			Containers: []v1.Container{{
				Name:  "web",
				Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
				Args:  []string{"netexec", "--http-port=8080"},
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			}},
		},
	}
}

// setRunning gives pod i the status a node agent writes once its container runs:
// phase Running, its IP, and Ready (with ContainersReady) set to ready.
func setRunning(pod *v1.Pod, i int, ready bool) {
	pod.Status.Phase = v1.PodRunning
	pod.Status.PodIP = podIP(i)
	pod.Status.PodIPs = []v1.PodIP{{IP: podIP(i)}}
	setReady(pod, ready)
}

// setReady sets the pod's Ready and ContainersReady conditions.
func setReady(pod *v1.Pod, ready bool) {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	now := metav1.Now()
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: status, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: status, LastTransitionTime: now},
	}
}
