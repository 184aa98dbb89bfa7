package ingress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func makeClass(name string, tweak func(*networkingv1.IngressClass)) *networkingv1.IngressClass {
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}
	if tweak != nil {
		tweak(ic)
	}
	return ic
}

func defaultClass() *networkingv1.IngressClass {
	return makeClass("tranche", func(ic *networkingv1.IngressClass) {
		ic.Annotations = map[string]string{annotationDefaultClass: "true"}
	})
}

// makeIngress returns an Ingress created age minutes after epoch.
func makeIngress(ns, name string, age int, tweak func(*networkingv1.Ingress)) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))}}
	if tweak != nil {
		tweak(ing)
	}
	return ing
}

func svcBackend(name string, port any) networkingv1.IngressBackend {
	b := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name}}
	switch p := port.(type) {
	case int:
		b.Service.Port.Number = int32(p)
	case string:
		b.Service.Port.Name = p
	}
	return b
}

func path(p string, pt networkingv1.PathType, b networkingv1.IngressBackend) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: ptr.To(pt), Backend: b}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func makeService(ns, name string, tweak func(*v1.Service)) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{
			{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}}
	if tweak != nil {
		tweak(s)
	}
	return s
}

// makeSlice returns a slice for service with one port (name, number) and ready endpoints
// at addrs.
func makeSlice(ns, name, service, portName string, port int32, addrs []string, tweak func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	if tweak != nil {
		tweak(sl)
	}
	return sl
}

// selfSigned returns PEM certificate and key for hosts.
func selfSigned(t testing.TB, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: hosts[0]},
		DNSNames: hosts, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func tlsSecret(t testing.TB, ns, name string, hosts ...string) *v1.Secret {
	c, k := selfSigned(t, hosts...)
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: v1.SecretTypeTLS,
		Data: map[string][]byte{v1.TLSCertKey: c, v1.TLSPrivateKeyKey: k}}
}

var slogDiscard = slog.New(slog.DiscardHandler)
