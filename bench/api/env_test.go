package api

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/bench/benchreport"
	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/embedded"
	"github.com/tranche/tranche/internal/storage/etcd"
)

const (
	// podCount is how many pods GET and LIST run against.
	podCount = 10000
	// podNamespace holds those pods and nothing else.
	podNamespace = "bench-pods"
	// loaders is how many clients load the pods in parallel.
	loaders = 16
)

// env is one embedded etcd and the real API handler over it, served over TLS with
// HTTP/2 on loopback as `tranche server` serves it, without authentication.
type env struct {
	etcd  *embedded.Server
	store storage.Interface
	srv   *httptest.Server
	base  *rest.Config

	loadOnce sync.Once
	loadErr  error
	podNames []string
}

// newEnv starts the environment and stops it when b's test ends. The data directory
// is short on purpose: etcd's unix socket path must fit in 108 bytes.
func newEnv(b *testing.B) *env {
	b.Helper()
	dir, err := os.MkdirTemp("", "trb-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := embedded.Start(ctx, embedded.Config{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	store := etcd.New(srv.Client())
	handler, err := apiserver.New(apiserver.Config{Storage: store, Resources: all.Resources()})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(handler)
	hs.EnableHTTP2 = true
	hs.StartTLS()
	b.Cleanup(hs.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	base := &rest.Config{
		Host:            hs.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		// A negative QPS turns client-go's rate limiter off: we measure the server.
		QPS:     -1,
		Timeout: time.Minute,
	}
	return &env{etcd: srv, store: store, srv: hs, base: base}
}

// client returns a clientset with a connection of its own, as a separate process would
// have; client-go would otherwise share one cached transport (one HTTP/2 connection)
// between all clientsets made from equal configs.
func (e *env) client(b *testing.B) *kubernetes.Clientset {
	b.Helper()
	cfg := rest.CopyConfig(e.base)
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = dialer.DialContext
	cs, err := kubernetes.NewForConfig(cfg)
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

// createNamespace creates namespace name through the API.
func (e *env) createNamespace(ctx context.Context, cs *kubernetes.Clientset, name string) error {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// loadPods creates podCount pods in podNamespace through the API, once per env, and
// records how long that took in rp. Later calls return the first call's error.
func (e *env) loadPods(b *testing.B, rp *report) error {
	b.Helper()
	e.loadOnce.Do(func() {
		ctx := context.Background()
		cls := e.clients(b, loaders)
		if e.loadErr = e.createNamespace(ctx, cls[0], podNamespace); e.loadErr != nil {
			return
		}
		names := make([]string, podCount)
		for i := range names {
			names[i] = fmt.Sprintf("web-%05d", i)
		}
		start := time.Now()
		n, err := benchreport.Parallel(ctx, cls, podCount, func(ctx context.Context, cs *kubernetes.Clientset, i int) error {
			pod := makePod(podNamespace, names[i], func(p *v1.Pod) { p.Spec.NodeName = fmt.Sprintf("node-%02d", i%50) })
			if _, err := cs.CoreV1().Pods(podNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s: %w", podNamespace, names[i], err)
			}
			return nil
		})
		if err != nil {
			e.loadErr = err
			return
		}
		elapsed := time.Since(start)
		e.podNames = names
		rp.Note("set-up: %d pods (%d B of JSON each in etcd) created through the API by %d clients in %s (%.0f pods/s)",
			n, e.storedSize(ctx, names[0]), loaders, ms(elapsed), float64(n)/elapsed.Seconds())
	})
	return e.loadErr
}

// storedSize returns the size of one stored pod, or 0 when the key layout is not the
// expected one.
func (e *env) storedSize(ctx context.Context, name string) int {
	kv, err := e.store.Get(ctx, podKey(name))
	if err != nil {
		return 0
	}
	return len(kv.Value)
}

// podPrefix is where the API server keeps the benchmark's pods in etcd (its key layout,
// the same as Kubernetes'); the raw etcd references read them there.
const podPrefix = "/registry/core/pods/" + podNamespace + "/"

func podKey(name string) string { return podPrefix + name }

// makePod builds a pod shaped like one a Deployment's ReplicaSet creates (labels, owner,
// one container with ports, env, resources, probe and a mount), so stored objects have
// a realistic size, then applies mutate.
func makePod(ns, name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			Labels:    map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6d", "tier": "frontend"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6d",
				UID: types.UID("0b7e8a52-3f0e-4c4e-9d55-6d2b3a9c1f10"), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:  "web",
				Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
				Args:  []string{"netexec", "--http-port=8080"},
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
				Env: []v1.EnvVar{
					{Name: "MODE", Value: "production"},
					{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
				},
				ReadinessProbe: &v1.Probe{
					ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
					PeriodSeconds: 5,
				},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// makeConfigMap builds a config map whose payload is size bytes, then applies mutate.
func makeConfigMap(ns, name string, size int, mutate func(*v1.ConfigMap)) *v1.ConfigMap {
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"bench": "api"}},
		Data:       map[string]string{"payload": strings.Repeat("x", size)},
	}
	if mutate != nil {
		mutate(cm)
	}
	return cm
}
