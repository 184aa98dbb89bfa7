package crd

import (
	"context"
	"fmt"
	"net"
	"net/url"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/util/proxy"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// DialFunc connects to an address.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// converters builds the conversion of definitions whose strategy is Webhook with
// apiextensions-apiserver's converter (ConversionReview v1 or v1beta1 as the definition
// lists them, the caBundle, a service reference's path and port, or a URL). A service is
// reached at one of its ready endpoints, as kube-apiserver routes webhooks, dialled from
// the cluster network.
type converters struct {
	factory *conversion.CRConverterFactory
}

// newConverters starts the Service and EndpointSlice informers the service resolver
// reads (until ctx ends) and returns the converter factory; dial reaches cluster
// addresses (nil dials directly, for loopback webhooks in tests).
func newConverters(ctx context.Context, cfg *rest.Config, dial DialFunc) (*converters, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	getter, err := proxy.NewEndpointSliceListerGetter(slices.Lister())
	if err != nil {
		return nil, err
	}
	resolver := &endpointResolver{services: services.Lister(), slices: getter}
	servicesSynced, slicesSynced := services.Informer().HasSynced, slices.Informer().HasSynced
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), servicesSynced, slicesSynced) {
		return nil, fmt.Errorf("conversion webhooks: service caches not synced")
	}
	wrap := func(r webhookutil.AuthenticationInfoResolver) webhookutil.AuthenticationInfoResolver {
		return &dialingResolver{next: r, dial: dial}
	}
	f, err := conversion.NewCRConverterFactory(resolver, wrap)
	if err != nil {
		return nil, err
	}
	return &converters{factory: f}, nil
}

// convertFunc returns crd's conversion for apiserver.DynamicOptions.Convert: nil for
// strategy None (the store rewrites apiVersion), else its webhook.
func (c *converters) convertFunc(crd *apiextv1.CustomResourceDefinition) (func(runtime.Object, schema.GroupVersion) (runtime.Object, error), error) {
	if c == nil || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextv1.WebhookConverter {
		return nil, nil
	}
	_, unsafe, err := c.factory.NewConverter(crd)
	if err != nil {
		return nil, err
	}
	return func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
		return unsafe.ConvertToVersion(obj, to)
	}, nil
}

// endpointResolver resolves a service reference to one of its ready endpoints.
type endpointResolver struct {
	services corelisters.ServiceLister
	slices   proxy.EndpointSliceGetter
}

func (r *endpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return proxy.ResolveEndpoint(r.services, r.slices, namespace, name, port)
}

// dialingResolver makes webhook clients dial through dial, except to loopback hosts.
type dialingResolver struct {
	next webhookutil.AuthenticationInfoResolver
	dial DialFunc
}

func (d *dialingResolver) ClientConfigFor(hostPort string) (*rest.Config, error) {
	cfg, err := d.next.ClientConfigFor(hostPort)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	if ip := net.ParseIP(host); d.dial == nil || (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return cfg, nil
	}
	cfg.Dial = d.dial
	return cfg, nil
}

func (d *dialingResolver) ClientConfigForService(name, namespace string, port int) (*rest.Config, error) {
	cfg, err := d.next.ClientConfigForService(name, namespace, port)
	if err != nil {
		return nil, err
	}
	if d.dial != nil {
		cfg.Dial = d.dial
	}
	return cfg, nil
}
