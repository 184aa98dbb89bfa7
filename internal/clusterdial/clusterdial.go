// Package clusterdial is how the API server reaches servers that run in the cluster:
// admission and conversion webhooks and aggregated API servers behind a Service. As
// kube-apiserver routes to them, a Service reference resolves to one of its ready
// endpoints (the pod, not the ClusterIP), and connections to cluster addresses go
// through the cluster network's dialer; loopback addresses are dialed directly.
package clusterdial

import (
	"context"
	"net"
	"net/url"

	"k8s.io/apiserver/pkg/util/proxy"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// DialFunc connects to an address.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// EndpointResolver resolves a Service reference to a ready endpoint of its port
// (webhookutil.ServiceResolver).
type EndpointResolver struct {
	Services corelisters.ServiceLister
	Slices   proxy.EndpointSliceGetter
}

var _ webhookutil.ServiceResolver = (*EndpointResolver)(nil)

// NewEndpointResolver reads factory's Services and EndpointSlices; it returns the
// informers' HasSynced for the caller to wait on once the factory is started.
func NewEndpointResolver(factory informers.SharedInformerFactory) (*EndpointResolver, []cache.InformerSynced, error) {
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	getter, err := proxy.NewEndpointSliceListerGetter(slices.Lister())
	if err != nil {
		return nil, nil, err
	}
	synced := []cache.InformerSynced{services.Informer().HasSynced, slices.Informer().HasSynced}
	return &EndpointResolver{Services: services.Lister(), Slices: getter}, synced, nil
}

// ResolveEndpoint returns https://IP:port of a ready endpoint of the Service's port.
func (r *EndpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return proxy.ResolveEndpoint(r.Services, r.Slices, namespace, name, port)
}

// Wrapper makes the webhook clients k8s.io/apiserver builds dial cluster addresses
// with dial (nil: directly, for tests whose webhooks listen on loopback).
func Wrapper(dial DialFunc) webhookutil.AuthenticationInfoResolverWrapper {
	return func(r webhookutil.AuthenticationInfoResolver) webhookutil.AuthenticationInfoResolver {
		return &dialingResolver{next: r, dial: dial}
	}
}

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
