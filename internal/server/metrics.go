package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/metadata/metadatalister"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/metrics"
)

// resourceMetrics serves metrics.k8s.io/v1beta1 (internal/metrics): the API server is
// its own metrics-server, scraping the nodes with its kubelet client certificate.
// Until its caches are filled the API answers 503.
type resourceMetrics struct {
	api atomic.Pointer[metrics.API]
}

var (
	nodeMetricsGVR = metricsv1beta1.SchemeGroupVersion.WithResource("nodes")
	podMetricsGVR  = metricsv1beta1.SchemeGroupVersion.WithResource("pods")
)

// handlers are the apiserver.Config.Computed handlers of the two resources.
func (m *resourceMetrics) handlers() map[schema.GroupVersionResource]apiserver.SubresourceHandler {
	return map[schema.GroupVersionResource]apiserver.SubresourceHandler{
		nodeMetricsGVR: m.serve,
		podMetricsGVR:  m.serve,
	}
}

func (m *resourceMetrics) serve(_ context.Context, w http.ResponseWriter, r *http.Request, req apiserver.Request) error {
	api := m.api.Load()
	if api == nil {
		return apierrors.NewServiceUnavailable("the resource metrics API is starting")
	}
	var obj runtime.Object
	var err error
	switch {
	case req.Verb == "get" && req.Resource == "nodes":
		obj, err = api.NodeMetrics(req.Name)
	case req.Verb == "get":
		obj, err = api.PodMetrics(req.Namespace, req.Name)
	default:
		var q metrics.Query
		if q, err = metrics.ParseQuery(r.URL.Query().Get("labelSelector"), r.URL.Query().Get("fieldSelector")); err != nil {
			return err
		}
		if req.Resource == "nodes" {
			obj, err = api.ListNodeMetrics(q)
		} else {
			obj, err = api.ListPodMetrics(req.Namespace, q)
		}
	}
	if err != nil {
		return err
	}
	apiserver.WriteObject(w, http.StatusOK, obj)
	return nil
}

// start fills the caches of nodes and of pods' metadata (their labels), then serves
// the API and scrapes the nodes until ctx ends. dial reaches the nodes (nil dials
// directly) and cert is the API server's kubelet client certificate.
func (m *resourceMetrics) start(ctx context.Context, loop *rest.Config, cert tls.Certificate, dial func(ctx context.Context, network, addr string) (net.Conn, error), log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(loop)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(loop)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes().Lister()
	podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	metaFactory := metadatainformer.NewSharedInformerFactory(meta, 0)
	podInformer := metaFactory.ForResource(podsGVR)
	factory.Start(ctx.Done())
	metaFactory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("waiting for the %v cache: %w", typ, context.Cause(ctx))
		}
	}
	for gvr, ok := range metaFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("waiting for the %v cache: %w", gvr, context.Cause(ctx))
		}
	}
	if dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second}
		dial = d.DialContext
	}
	httpClient := &http.Client{Transport: &http.Transport{
		DialContext: dial,
		// Agents' serving certificates are self-signed and not verified, as for logs and
		// exec (apiserver.Nodes.TLS); the agent checks ours.
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above.
		// Kept across scrapes (15 s apart): one TLS handshake per node, not per scrape.
		MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * metrics.DefaultResolution, TLSHandshakeTimeout: 5 * time.Second,
	}}
	store := &metrics.Store{Resolution: metrics.DefaultResolution}
	m.api.Store(&metrics.API{Store: store, Nodes: nodeLister{nodes}, Pods: podLister{metadatalister.New(podInformer.Informer().GetIndexer(), podsGVR)}})
	scraper := &metrics.Scraper{Client: httpClient, Store: store, Resolution: metrics.DefaultResolution, Logger: log,
		Nodes: func() ([]*v1.Node, error) { return nodes.List(labels.Everything()) }}
	go scraper.Run(ctx)
	return nil
}

// nodeLister is a metrics.Lister over the node cache.
type nodeLister struct{ l corelisters.NodeLister }

func (n nodeLister) List(_ string, sel labels.Selector) ([]metav1.Object, error) {
	nodes, err := n.l.List(sel)
	out := make([]metav1.Object, len(nodes))
	for i, node := range nodes {
		out[i] = node
	}
	return out, err
}

func (n nodeLister) Get(_, name string) (metav1.Object, error) { return n.l.Get(name) }

// podLister is a metrics.Lister over the cache of pods' metadata.
type podLister struct{ l metadatalister.Lister }

func (p podLister) List(namespace string, sel labels.Selector) ([]metav1.Object, error) {
	var pods []*metav1.PartialObjectMetadata
	var err error
	if namespace == "" {
		pods, err = p.l.List(sel)
	} else {
		pods, err = p.l.Namespace(namespace).List(sel)
	}
	out := make([]metav1.Object, len(pods))
	for i, pod := range pods {
		out[i] = pod
	}
	return out, err
}

func (p podLister) Get(namespace, name string) (metav1.Object, error) {
	return p.l.Namespace(namespace).Get(name)
}
