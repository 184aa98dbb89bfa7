package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tranche/tranche/internal/registry"
)

// ServiceHandlers are the service subresources served by the service's own code:
// services/proxy, hidden from discovery as it has always been here.
func ServiceHandlers() []registry.Handler {
	return []registry.Handler{{Name: "proxy", Hidden: true, Connect: serviceProxyLocation}}
}

// serviceProxyLocation serves services/NAME[:PORT]/proxy/...: HTTP to one ready
// endpoint.
func serviceProxyLocation(ctx context.Context, req *registry.HandlerRequest) (*registry.Location, error) {
	scheme, name, portID := proxyTarget(req.Name)
	obj, err := req.Objects.Get(ctx, req.Namespace, name)
	if err != nil {
		return nil, err
	}
	svc, ok := obj.(*v1.Service)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored service %s/%s is a %T", req.Namespace, name, obj))
	}
	var sp *v1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if portID == p.Name || portID == strconv.Itoa(int(p.Port)) || (portID == "" && len(svc.Spec.Ports) == 1) {
			sp = p
			break
		}
	}
	if sp == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %q found for service %q", portID, name))
	}
	obj, err = req.Objects.GetOf(ctx, v1.SchemeGroupVersion.WithResource("endpoints"), req.Namespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	var hosts []string
	if eps, ok := obj.(*v1.Endpoints); ok && err == nil {
		for _, ss := range eps.Subsets {
			for _, p := range ss.Ports {
				if p.Name != sp.Name {
					continue
				}
				for _, a := range ss.Addresses {
					hosts = append(hosts, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
				}
			}
		}
	}
	if len(hosts) == 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	if scheme == "" {
		scheme = "http"
	}
	target := &url.URL{Scheme: scheme, Host: hosts[rand.IntN(len(hosts))], Path: proxyRest(req.Path), RawQuery: req.RawQuery}
	return &registry.Location{URL: target, Backend: registry.BackendPod, DialError: "error trying to reach service"}, nil
}
