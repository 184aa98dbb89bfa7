package server

import (
	"context"
	"fmt"
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The default/kubernetes Service: how pods reach the API server.
const (
	apiServiceName = "kubernetes"
	apiPortName    = "https"
	// apiSliceManager marks the slice the API server keeps itself.
	apiSliceManager = "tranche-apiserver"
)

// ensureAPIService creates default/kubernetes with the first address of the service
// range and port 443 → the API server's port.
func ensureAPIService(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	p := advertisedPort(cfg)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: apiServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: v1.ServiceSpec{
			ClusterIP: nthAddr(cfg.ServiceCIDR, 1).String(),
			Ports:     []v1.ServicePort{{Name: apiPortName, Port: 443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(p))}},
		},
	}
	_, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, apiServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, svc, metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("service default/kubernetes: %w", err)
	}
	return nil
}

// advertisedPort is the port the kubernetes Service's endpoints point at.
func advertisedPort(cfg Config) int {
	if cfg.AdvertisePort != 0 {
		return cfg.AdvertisePort
	}
	_, port, _ := net.SplitHostPort(cfg.Listen)
	p, _ := strconv.Atoi(port)
	return p
}

// writeAPIEndpoints makes the kubernetes Endpoints and EndpointSlice list ips (sorted)
// at port, leaving them alone when they already do.
func writeAPIEndpoints(ctx context.Context, client kubernetes.Interface, ips []string, port int32) error {
	addrs := make([]v1.EndpointAddress, 0, len(ips))
	endpoints := make([]discoveryv1.Endpoint, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, v1.EndpointAddress{IP: ip})
		endpoints = append(endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	var subsets []v1.EndpointSubset
	if len(addrs) > 0 {
		subsets = []v1.EndpointSubset{{Addresses: addrs, Ports: []v1.EndpointPort{{Name: apiPortName, Port: port, Protocol: v1.ProtocolTCP}}}}
	}
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: apiServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: subsets,
	}
	eps := client.CoreV1().Endpoints(metav1.NamespaceDefault)
	cur, err := eps.Get(ctx, apiServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := eps.Create(ctx, ep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	case err != nil:
		return err
	case !apiequality.Semantic.DeepEqual(cur.Subsets, ep.Subsets) || cur.Labels[discoveryv1.LabelSkipMirror] != "true":
		cur.Subsets, cur.Labels = ep.Subsets, ep.Labels
		if _, err := eps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: apiServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: apiServiceName, discoveryv1.LabelManagedBy: apiSliceManager}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(apiPortName), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	slices := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	curSlice, err := slices.Get(ctx, apiServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	case err != nil:
		return err
	case !apiequality.Semantic.DeepEqual(curSlice.Endpoints, slice.Endpoints) || !apiequality.Semantic.DeepEqual(curSlice.Ports, slice.Ports):
		curSlice.Endpoints, curSlice.Ports = slice.Endpoints, slice.Ports
		if _, err := slices.Update(ctx, curSlice, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}
