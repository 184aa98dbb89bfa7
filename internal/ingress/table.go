package ingress

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// ControllerName is the spec.controller of the IngressClasses this controller serves.
const ControllerName = "tranche.dev/ingress"

// Annotations read on IngressClasses and Ingresses.
const (
	annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
	annotationLegacyClass  = "kubernetes.io/ingress.class"
)

// Table is the routing state built from a Cache snapshot. It is immutable once built,
// so the proxy reads it without locks and a new one replaces it atomically.
type Table struct {
	exact     map[string]*hostRoutes // by lower-case host
	wildcard  map[string]*hostRoutes // by the suffix after "*."
	anyHost   *hostRoutes
	def       *Backend // spec.defaultBackend of the oldest Ingress having one
	certs     map[string]*tls.Certificate
	wildCerts map[string]*tls.Certificate
	// Ingresses are the namespace/name of every Ingress served, in age order.
	Ingresses []string
	// Problems are what an Event should tell users about, in a stable order.
	Problems []Problem
}

// Problem is something wrong with an Ingress that users learn about through an Event.
type Problem struct {
	Ingress string // namespace/name
	Reason  string
	Message string
}

// Route is one path of one rule.
type Route struct {
	Ingress  string // namespace/name
	Path     string
	PathType networkingv1.PathType
	Backend  *Backend
}

type hostRoutes struct {
	exact    map[string]*Route
	prefixes []*Route // longest (in bytes, trailing '/' trimmed) first
}

// Backend is a Service port resolved to endpoints.
type Backend struct {
	Ingress   string // the Ingress that named it, namespace/name
	Namespace string
	Service   string
	Port      string // as the Ingress wrote it: a number or a name
	// Ready are the ready endpoints (host:port); Fallback are serving and terminating
	// ones, used only when no endpoint is ready.
	Ready    []string
	Fallback []string
	// Missing, when set, says why the backend cannot be reached; requests get 503.
	Missing string
	next    atomic.Uint64
	name    string // Name, computed once by Build: logs ask for it on every request
}

// Name is the backend as metrics and logs show it: namespace/service:port.
func (b *Backend) Name() string {
	if b.name != "" {
		return b.name
	}
	return b.Namespace + "/" + b.Service + ":" + b.Port
}

// Endpoints returns the endpoints to use now: the ready ones, else the serving and
// terminating ones.
func (b *Backend) Endpoints() []string {
	if len(b.Ready) > 0 {
		return b.Ready
	}
	return b.Fallback
}

// Pick returns the endpoint for one attempt, round robin across Endpoints; "" when none.
func (b *Backend) Pick() string {
	eps := b.Endpoints()
	if len(eps) == 0 {
		return ""
	}
	return eps[(b.next.Add(1)-1)%uint64(len(eps))]
}

// PickOther returns the endpoint for a retry: the next one in the round robin that is
// not in tried, as nginx's round robin skips the servers a request already tried
// (other requests move the round robin on meanwhile, so Pick could give a request the
// endpoint that just failed it); "" when every endpoint was tried.
func (b *Backend) PickOther(tried []string) string {
	eps := b.Endpoints()
	for range eps {
		if ep := eps[(b.next.Add(1)-1)%uint64(len(eps))]; !slices.Contains(tried, ep) {
			return ep
		}
	}
	return ""
}

// Build computes the Table for the Ingresses of this controller's classes in c. It does no
// I/O beyond reading c and is deterministic for a given content of c.
func Build(c Cache) *Table {
	t := &Table{
		exact: map[string]*hostRoutes{}, wildcard: map[string]*hostRoutes{},
		anyHost: newHostRoutes(), certs: map[string]*tls.Certificate{}, wildCerts: map[string]*tls.Certificate{},
	}
	ings := ownIngresses(c, t)
	certOwner := map[string]string{}
	routeOwner := map[string]string{}
	defOwner := ""
	for _, ing := range ings {
		id := ing.Namespace + "/" + ing.Name
		t.Ingresses = append(t.Ingresses, id)
		backends := map[string]*Backend{}
		backend := func(b networkingv1.IngressBackend) *Backend {
			key := backendKey(b)
			if be, ok := backends[key]; ok {
				return be
			}
			be := resolveBackend(c, ing.Namespace, id, b)
			be.name = be.Name()
			if be.Missing != "" {
				t.problem(id, "BackendMissing", be.Missing)
			}
			backends[key] = be
			return be
		}
		if db := ing.Spec.DefaultBackend; db != nil {
			if defOwner == "" {
				t.def, defOwner = backend(*db), id
			} else {
				t.problem(id, "Conflict", fmt.Sprintf("spec.defaultBackend ignored: Ingress %s is older and has one", defOwner))
			}
		}
		for i, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			host := strings.ToLower(rule.Host)
			hr := t.group(host)
			for j, p := range rule.HTTP.Paths {
				pt := networkingv1.PathTypeImplementationSpecific
				if p.PathType != nil {
					pt = *p.PathType
				}
				path := p.Path
				if path == "" {
					path = "/"
				}
				if pt != networkingv1.PathTypeExact {
					pt = networkingv1.PathTypePrefix
					path = trimSlash(path)
				}
				key := host + " " + string(pt) + " " + path
				if owner, ok := routeOwner[key]; ok {
					t.problem(id, "Conflict", fmt.Sprintf("spec.rules[%d].http.paths[%d] (host %q, %s %s) ignored: Ingress %s is older and routes it", i, j, rule.Host, pt, p.Path, owner))
					continue
				}
				routeOwner[key] = id
				r := &Route{Ingress: id, Path: path, PathType: pt, Backend: backend(p.Backend)}
				if pt == networkingv1.PathTypeExact {
					hr.exact[path] = r
				} else {
					hr.prefixes = append(hr.prefixes, r)
				}
			}
		}
		t.addTLS(c, ing, id, certOwner)
	}
	for _, hr := range t.allGroups() {
		sort.SliceStable(hr.prefixes, func(i, j int) bool { return len(hr.prefixes[i].Path) > len(hr.prefixes[j].Path) })
	}
	return t
}

// ownIngresses returns the Ingresses of this controller's classes, oldest first, and
// records a Problem for those naming a class that does not exist.
func ownIngresses(c Cache, t *Table) []*networkingv1.Ingress {
	ours := map[string]bool{}
	exists := map[string]bool{}
	defaultOurs := false
	for _, ic := range c.IngressClasses() {
		exists[ic.Name] = true
		if ic.Spec.Controller != ControllerName {
			continue
		}
		ours[ic.Name] = true
		if ic.Annotations[annotationDefaultClass] == "true" {
			defaultOurs = true
		}
	}
	var out []*networkingv1.Ingress
	for _, ing := range c.Ingresses() {
		class := ""
		if ing.Spec.IngressClassName != nil {
			class = *ing.Spec.IngressClassName
		} else if a, ok := ing.Annotations[annotationLegacyClass]; ok {
			class = a
		}
		switch {
		case class == "" && defaultOurs, ours[class]:
			out = append(out, ing)
		case class != "" && !exists[class] && defaultOurs:
			// Nobody serves it; say so, since the user probably meant us.
			t.problem(ing.Namespace+"/"+ing.Name, "IngressClassMissing",
				fmt.Sprintf("spec.ingressClassName %q: no such IngressClass; create one with spec.controller %s to be served by tranche", class, ControllerName))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return out
}

func (t *Table) addTLS(c Cache, ing *networkingv1.Ingress, id string, owner map[string]string) {
	for i, tl := range ing.Spec.TLS {
		hosts := tl.Hosts
		if len(hosts) == 0 {
			for _, r := range ing.Spec.Rules {
				if r.Host != "" {
					hosts = append(hosts, r.Host)
				}
			}
		}
		if tl.SecretName == "" {
			continue
		}
		cert, err := secretCertificate(c, ing.Namespace, tl.SecretName)
		if err != nil {
			t.problem(id, "TLSSecretInvalid", fmt.Sprintf("spec.tls[%d]: %v; hosts %s get the fallback certificate", i, err, strings.Join(hosts, ", ")))
			continue
		}
		for _, h := range hosts {
			h = strings.ToLower(h)
			if o, ok := owner[h]; ok {
				if o != id {
					t.problem(id, "Conflict", fmt.Sprintf("spec.tls[%d]: certificate for %q ignored: Ingress %s is older and has one", i, h, o))
				}
				continue
			}
			owner[h] = id
			if suffix, ok := strings.CutPrefix(h, "*."); ok {
				t.wildCerts[suffix] = cert
			} else {
				t.certs[h] = cert
			}
		}
	}
}

func secretCertificate(c Cache, ns, name string) (*tls.Certificate, error) {
	s, ok := c.Secret(ns, name)
	if !ok {
		return nil, fmt.Errorf("Secret %s/%s not found", ns, name)
	}
	if s.Type != v1.SecretTypeTLS {
		return nil, fmt.Errorf("Secret %s/%s has type %q, want %s", ns, name, s.Type, v1.SecretTypeTLS)
	}
	cert, err := tls.X509KeyPair(s.Data[v1.TLSCertKey], s.Data[v1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %s and %s: %w", ns, name, v1.TLSCertKey, v1.TLSPrivateKeyKey, err)
	}
	return &cert, nil
}

func backendKey(b networkingv1.IngressBackend) string {
	if b.Service == nil {
		return ""
	}
	return b.Service.Name + ":" + b.Service.Port.Name + ":" + strconv.Itoa(int(b.Service.Port.Number))
}

// resolveBackend finds the Service port an Ingress backend names and the endpoints for it.
func resolveBackend(c Cache, ns, id string, b networkingv1.IngressBackend) *Backend {
	be := &Backend{Ingress: id, Namespace: ns}
	if b.Service == nil {
		be.Service, be.Port = "-", "-"
		be.Missing = "backend is a resource, not a Service; tranche serves Service backends only"
		return be
	}
	be.Service = b.Service.Name
	be.Port = b.Service.Port.Name
	if be.Port == "" {
		be.Port = strconv.Itoa(int(b.Service.Port.Number))
	}
	svc, ok := c.Service(ns, b.Service.Name)
	if !ok {
		be.Missing = fmt.Sprintf("Service %s/%s not found", ns, b.Service.Name)
		return be
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		be.Missing = fmt.Sprintf("Service %s/%s is of type ExternalName, which tranche's Ingress does not proxy to", ns, svc.Name)
		return be
	}
	var sp *v1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Protocol != "" && p.Protocol != v1.ProtocolTCP {
			continue
		}
		if (b.Service.Port.Name != "" && p.Name == b.Service.Port.Name) ||
			(b.Service.Port.Name == "" && p.Port == b.Service.Port.Number) {
			sp = p
			break
		}
	}
	if sp == nil {
		be.Missing = fmt.Sprintf("Service %s/%s has no TCP port %s", ns, svc.Name, be.Port)
		return be
	}
	for _, sl := range c.EndpointSlices(ns, svc.Name) {
		port := int32(-1)
		for _, p := range sl.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == sp.Name && p.Port != nil && (p.Protocol == nil || *p.Protocol == v1.ProtocolTCP) {
				port = *p.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, ep := range sl.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			addr := net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))
			cond := ep.Conditions
			switch {
			case cond.Ready == nil || *cond.Ready:
				be.Ready = append(be.Ready, addr)
			case cond.Serving != nil && *cond.Serving && cond.Terminating != nil && *cond.Terminating:
				be.Fallback = append(be.Fallback, addr)
			}
		}
	}
	sort.Strings(be.Ready)
	sort.Strings(be.Fallback)
	return be
}

func newHostRoutes() *hostRoutes { return &hostRoutes{exact: map[string]*Route{}} }

func (t *Table) group(host string) *hostRoutes {
	m, key := t.exact, host
	switch {
	case host == "":
		return t.anyHost
	case strings.HasPrefix(host, "*."):
		m, key = t.wildcard, host[2:]
	}
	hr, ok := m[key]
	if !ok {
		hr = newHostRoutes()
		m[key] = hr
	}
	return hr
}

func (t *Table) allGroups() []*hostRoutes {
	out := []*hostRoutes{t.anyHost}
	for _, hr := range t.exact {
		out = append(out, hr)
	}
	for _, hr := range t.wildcard {
		out = append(out, hr)
	}
	return out
}

func (t *Table) problem(id, reason, msg string) {
	t.Problems = append(t.Problems, Problem{Ingress: id, Reason: reason, Message: msg})
}

func trimSlash(p string) string {
	if p == "/" {
		return p
	}
	return strings.TrimRight(p, "/")
}

// Route returns the route for a request to host (without port, any case) and path, or
// nil when no rule matches (the caller then uses Default).
func (t *Table) Route(host, path string) *Route {
	host = strings.ToLower(host)
	if hr, ok := t.exact[host]; ok {
		if r := hr.match(path); r != nil {
			return r
		}
	}
	if _, suffix, ok := strings.Cut(host, "."); ok {
		if hr, ok := t.wildcard[suffix]; ok {
			if r := hr.match(path); r != nil {
				return r
			}
		}
	}
	return t.anyHost.match(path)
}

// Default returns the default backend, or nil when no Ingress has one.
func (t *Table) Default() *Backend { return t.def }

func (hr *hostRoutes) match(path string) *Route {
	if r, ok := hr.exact[path]; ok {
		return r
	}
	for _, r := range hr.prefixes {
		if prefixMatch(r.Path, path) {
			return r
		}
	}
	return nil
}

// prefixMatch reports whether the request path's elements start with the rule's.
func prefixMatch(rule, path string) bool {
	if rule == "/" {
		return true
	}
	if !strings.HasPrefix(path, rule) {
		return false
	}
	return len(path) == len(rule) || path[len(rule)] == '/'
}

// Certificate returns the certificate for a TLS server name: an exact host, else a
// one-label wildcard; nil when neither is configured.
func (t *Table) Certificate(serverName string) *tls.Certificate {
	name := strings.ToLower(strings.TrimSuffix(serverName, "."))
	if c, ok := t.certs[name]; ok {
		return c
	}
	if _, suffix, ok := strings.Cut(name, "."); ok {
		if c, ok := t.wildCerts[suffix]; ok {
			return c
		}
	}
	return nil
}
