package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Nodes lets the API server reach node agents and pods, for the streaming
// subresources (pods/log, exec, attach, portforward) carried to the pod's node and the
// proxy subresources (pods/proxy, services/proxy) carried to a pod.
type Nodes struct {
	// Dial connects to a cluster address: a node agent's endpoint or a pod. `tranche
	// up` dials from its underlay namespace; nil dials directly.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS is the client side of node agents' endpoints: the API server's client
	// certificate. Agents' serving certificates are self-signed and not verified (as
	// Kubernetes' API server does not verify kubelets without
	// --kubelet-certificate-authority); the client certificate is what the agent checks.
	TLS *tls.Config
}

// streamTransports are the HTTP transports built from Config.Nodes.
type streamTransports struct {
	node, pod *http.Transport
}

func newStreamTransports(n *Nodes) *streamTransports {
	if n == nil {
		return nil
	}
	dial := n.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		dial = d.DialContext
	}
	return &streamTransports{
		node: &http.Transport{DialContext: dial, TLSClientConfig: n.TLS, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 8,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second},
		pod: &http.Transport{DialContext: dial, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // pods' certificates are their own business, as in Kubernetes' proxy.
	}
}

type streamHandler func(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error

// streamHandlers are the subresources served by carrying the request elsewhere.
var streamHandlers = map[string]streamHandler{
	"pods/log": (*Server).podLog,
	"pods/exec": func(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
		return s.podCommand(ctx, w, r, ri, e, "exec")
	},
	"pods/attach": func(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
		return s.podCommand(ctx, w, r, ri, e, "attach")
	},
	"pods/portforward": (*Server).podPortForward,
	"pods/proxy":       (*Server).podProxy,
	"services/proxy":   (*Server).serviceProxy,
}

func (s *Server) transports() (*streamTransports, error) {
	if s.streams == nil {
		return nil, apierrors.NewServiceUnavailable("this API server is not configured to reach nodes and pods")
	}
	return s.streams, nil
}

// getPod reads a pod.
func (s *Server) getPod(ctx context.Context, e *entry, ns, name string) (*v1.Pod, error) {
	obj, _, err := e.store.get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored pod %s/%s is a %T", ns, name, obj))
	}
	return pod, nil
}

// nodeURL is the base URL of the agent endpoint of the pod's node.
func (s *Server) nodeURL(ctx context.Context, pod *v1.Pod) (*url.URL, error) {
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	ne := s.lookup("", "v1", "nodes")
	if ne == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("nodes are not served"))
	}
	obj, _, err := ne.store.get(ctx, "", pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	node, ok := obj.(*v1.Node)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored node %s is a %T", pod.Spec.NodeName, obj))
	}
	var addr string
	for _, want := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == want && addr == "" {
				addr = a.Address
			}
		}
	}
	if addr == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no address to reach it at", node.Name))
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = 10250
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(addr, strconv.Itoa(port))}, nil
}

// containerNames lists a pod's containers, its init containers and its ephemeral
// containers.
func containerNames(pod *v1.Pod) (names, inits, ephemerals []string) {
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		inits = append(inits, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		ephemerals = append(ephemerals, c.Name)
	}
	return names, inits, ephemerals
}

// resolveContainer picks the container a request is about, as Kubernetes does: the only
// one when none is named; an unknown name is a 400 that lists the valid ones.
func resolveContainer(pod *v1.Pod, name string) (string, error) {
	names, inits, ephemerals := containerNames(pod)
	choices := fmt.Sprintf("[%s]", strings.Join(names, " "))
	if len(inits) > 0 {
		choices += fmt.Sprintf(" or one of the init containers: [%s]", strings.Join(inits, " "))
	}
	if len(ephemerals) > 0 {
		choices += fmt.Sprintf(" or one of the ephemeral containers: [%s]", strings.Join(ephemerals, " "))
	}
	if name == "" {
		switch len(names) {
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("the pod %s does not have a container", pod.Name))
		case 1:
			return names[0], nil
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, choices))
	}
	if !slices.Contains(names, name) && !slices.Contains(inits, name) && !slices.Contains(ephemerals, name) {
		return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s, choose one of: %s", name, pod.Name, choices))
	}
	return name, nil
}

// containerStatus returns the status of a pod's container, if reported.
func containerStatus(pod *v1.Pod, name string) (v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, st := range list {
			if st.Name == name {
				return st, true
			}
		}
	}
	return v1.ContainerStatus{}, false
}

// podLog serves GET pods/NAME/log from the node's log files.
func (s *Server) podLog(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	if ri.Verb != "get" {
		return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/log"}, ri.Verb)
	}
	t, err := s.transports()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if err := validateLogOptions(q); err != nil {
		return err
	}
	pod, err := s.getPod(ctx, e, ri.Namespace, ri.Name)
	if err != nil {
		return err
	}
	container, err := resolveContainer(pod, q.Get("container"))
	if err != nil {
		return err
	}
	previous := isTrue(q.Get("previous"))
	st, ok := containerStatus(pod, container)
	switch {
	case previous && (!ok || st.LastTerminationState.Terminated == nil):
		return apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod.Name))
	case !previous && (!ok || (st.State.Waiting != nil && st.LastTerminationState.Terminated == nil)):
		reason := "ContainerCreating"
		if ok && st.State.Waiting.Reason != "" {
			reason = st.State.Waiting.Reason
		}
		return apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: %s", container, pod.Name, reason))
	}
	base, err := s.nodeURL(ctx, pod)
	if err != nil {
		return err
	}
	out := url.Values{}
	for _, k := range []string{"follow", "previous", "timestamps", "tailLines", "sinceSeconds", "sinceTime", "limitBytes"} {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	base.Path = fmt.Sprintf("/containerLogs/%s/%s/%s/%s", pod.Namespace, pod.Name, pod.UID, container)
	base.RawQuery = out.Encode()
	s.forward(w, r, base, t.node, "error dialing backend")
	return nil
}

// validateLogOptions checks PodLogOptions' numbers, with Kubernetes' field messages.
func validateLogOptions(q url.Values) error {
	var msgs []string
	positive := func(key string, min int64) {
		if v := q.Get(key); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < min {
				if min == 0 {
					msgs = append(msgs, fmt.Sprintf("%s: Invalid value: %q: must be greater than or equal to 0", key, v))
				} else {
					msgs = append(msgs, fmt.Sprintf("%s: Invalid value: %q: must be greater than 0", key, v))
				}
			}
		}
	}
	positive("tailLines", 0)
	positive("limitBytes", 1)
	positive("sinceSeconds", 1)
	if v := q.Get("sinceTime"); v != "" {
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			msgs = append(msgs, fmt.Sprintf("sinceTime: Invalid value: %q: must be an RFC 3339 time", v))
		}
		if q.Get("sinceSeconds") != "" {
			msgs = append(msgs, "at most one of `sinceTime` or `sinceSeconds` may be specified")
		}
	}
	if len(msgs) > 0 {
		return apierrors.NewBadRequest(strings.Join(msgs, ", "))
	}
	return nil
}

// podCommand serves pods/NAME/exec and pods/NAME/attach (GET for WebSocket clients,
// POST for SPDY): it checks the container, then hands the upgrade to the node.
func (s *Server) podCommand(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry, kind string) error {
	if ri.Verb != "get" && ri.Verb != "create" {
		return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/" + kind}, ri.Verb)
	}
	t, err := s.transports()
	if err != nil {
		return err
	}
	pod, err := s.getPod(ctx, e, ri.Namespace, ri.Name)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	container, err := resolveContainer(pod, q.Get("container"))
	if err != nil {
		return err
	}
	if kind == "exec" && len(q["command"]) == 0 {
		return apierrors.NewBadRequest("you must specify at least one command for the container")
	}
	if p := pod.Status.Phase; p == v1.PodSucceeded || p == v1.PodFailed {
		verb := "exec into"
		if kind == "attach" {
			verb = "attach to"
		}
		return apierrors.NewBadRequest(fmt.Sprintf("cannot %s a container in a completed pod; current phase is %s", verb, p))
	}
	if st, ok := containerStatus(pod, container); !ok || st.State.Running == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("container not found (%q)", container))
	}
	base, err := s.nodeURL(ctx, pod)
	if err != nil {
		return err
	}
	base.Path = fmt.Sprintf("/%s/%s/%s/%s/%s", kind, pod.Namespace, pod.Name, pod.UID, container)
	base.RawQuery = r.URL.RawQuery
	s.forward(w, r, base, t.node, "error dialing backend")
	return nil
}

// podPortForward serves pods/NAME/portforward.
func (s *Server) podPortForward(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	if ri.Verb != "get" && ri.Verb != "create" {
		return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/portforward"}, ri.Verb)
	}
	t, err := s.transports()
	if err != nil {
		return err
	}
	pod, err := s.getPod(ctx, e, ri.Namespace, ri.Name)
	if err != nil {
		return err
	}
	if pod.Status.Phase != v1.PodRunning {
		return apierrors.NewBadRequest(fmt.Sprintf("unable to forward port because pod is not running. Current status=%s", pod.Status.Phase))
	}
	base, err := s.nodeURL(ctx, pod)
	if err != nil {
		return err
	}
	base.Path = fmt.Sprintf("/portForward/%s/%s/%s", pod.Namespace, pod.Name, pod.UID)
	base.RawQuery = r.URL.RawQuery
	s.forward(w, r, base, t.node, "error dialing backend")
	return nil
}

// upgradeCreateCheck is the extra authorization a WebSocket (GET) exec, attach or
// port-forward needs: create, as its SPDY (POST) form does, so that read access to
// pods never runs commands.
func upgradeCreateCheck(req Request) (Request, bool) {
	if req.Verb != "get" || req.APIGroup != "" || req.Resource != "pods" {
		return req, false
	}
	switch req.Subresource {
	case "exec", "attach", "portforward":
		req.Verb = "create"
		return req, true
	}
	return req, false
}

// proxyTarget splits a proxy name "[scheme:]name[:port]".
func proxyTarget(id string) (scheme, name, port string) {
	parts := strings.Split(id, ":")
	switch len(parts) {
	case 1:
		return "", parts[0], ""
	case 2:
		return "", parts[0], parts[1]
	default:
		return parts[0], parts[1], parts[2]
	}
}

// proxyRest is what follows /api/v1/namespaces/NS/RESOURCE/NAME/proxy in the request
// path ("/" when nothing does).
func proxyRest(r *http.Request) string {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 8)
	if len(parts) < 8 || parts[7] == "" {
		return "/"
	}
	return "/" + parts[7]
}

// podProxy serves pods/NAME[:PORT]/proxy/...: HTTP to the pod's address.
func (s *Server) podProxy(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	t, err := s.transports()
	if err != nil {
		return err
	}
	scheme, name, port := proxyTarget(ri.Name)
	pod, err := s.getPod(ctx, e, ri.Namespace, name)
	if err != nil {
		return err
	}
	if pod.Status.PodIP == "" {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no IP address yet", pod.Name))
	}
	if port == "" {
		port = "80"
	} else if _, err := strconv.Atoi(port); err != nil {
		named := ""
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == port {
					named = strconv.Itoa(int(p.ContainerPort))
				}
			}
		}
		if named == "" {
			return apierrors.NewBadRequest(fmt.Sprintf("pod %s has no port named %q", pod.Name, port))
		}
		port = named
	}
	if scheme == "" {
		scheme = "http"
	}
	target := &url.URL{Scheme: scheme, Host: net.JoinHostPort(pod.Status.PodIP, port), Path: proxyRest(r), RawQuery: r.URL.RawQuery}
	s.forward(w, r, target, t.pod, "error trying to reach pod")
	return nil
}

// serviceProxy serves services/NAME[:PORT]/proxy/...: HTTP to one ready endpoint.
func (s *Server) serviceProxy(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	t, err := s.transports()
	if err != nil {
		return err
	}
	scheme, name, portID := proxyTarget(ri.Name)
	obj, _, err := e.store.get(ctx, ri.Namespace, name)
	if err != nil {
		return err
	}
	svc, ok := obj.(*v1.Service)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("stored service %s/%s is a %T", ri.Namespace, name, obj))
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
		return apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %q found for service %q", portID, name))
	}
	ee := s.lookup("", "v1", "endpoints")
	if ee == nil {
		return apierrors.NewInternalError(fmt.Errorf("endpoints are not served"))
	}
	obj, _, err = ee.store.get(ctx, ri.Namespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
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
		return apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	if scheme == "" {
		scheme = "http"
	}
	target := &url.URL{Scheme: scheme, Host: hosts[rand.IntN(len(hosts))], Path: proxyRest(r), RawQuery: r.URL.RawQuery}
	s.forward(w, r, target, t.pod, "error trying to reach service")
	return nil
}

// forward proxies the request (an upgrade included) to target through transport,
// without the client's credentials.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, target *url.URL, transport http.RoundTripper, dialMsg string) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = target.Host
			pr.Out.RequestURI = ""
			for h := range pr.Out.Header {
				if h == "Authorization" || strings.HasPrefix(h, "Impersonate-") {
					pr.Out.Header.Del(h)
				}
			}
		},
		Transport:     transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Debug("proxying failed", "target", target.Redacted(), "err", err)
			writeError(w, s.log, apierrors.NewServiceUnavailable(fmt.Sprintf("%s: %v", dialMsg, err)))
		},
	}
	rp.ServeHTTP(w, r)
}
