package core

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tranche/tranche/internal/nodeaddr"
	"github.com/tranche/tranche/internal/registry"
)

// podStreamingHandlers are pods/log, exec, attach, portforward and proxy: each checks
// the pod and points the API server at its node agent (or, for proxy, at the pod).
func podStreamingHandlers() []registry.Handler {
	return []registry.Handler{
		{Name: "log", Verbs: []string{"get"}, Hidden: true, Connect: podLogLocation},
		{Name: "exec", Verbs: []string{"get", "create"}, Hidden: true, GetIsCreate: true, Connect: podCommandLocation("exec")},
		{Name: "attach", Verbs: []string{"get", "create"}, Hidden: true, GetIsCreate: true, Connect: podCommandLocation("attach")},
		{Name: "portforward", Verbs: []string{"get", "create"}, Hidden: true, GetIsCreate: true, Connect: podPortForwardLocation},
		{Name: "proxy", Hidden: true, Connect: podProxyLocation},
	}
}

// getPod reads a pod.
func getPod(ctx context.Context, objects registry.Objects, ns, name string) (*v1.Pod, error) {
	obj, err := objects.Get(ctx, ns, name)
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
func nodeURL(ctx context.Context, objects registry.Objects, pod *v1.Pod) (*url.URL, error) {
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	obj, err := objects.GetOf(ctx, v1.SchemeGroupVersion.WithResource("nodes"), "", pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	node, ok := obj.(*v1.Node)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored node %s is a %T", pod.Spec.NodeName, obj))
	}
	hostPort, ok := nodeaddr.Kubelet(node)
	if !ok {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no address to reach it at", node.Name))
	}
	return &url.URL{Scheme: "https", Host: hostPort}, nil
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

// podLogLocation serves GET pods/NAME/log from the node's log files.
func podLogLocation(ctx context.Context, req *registry.HandlerRequest) (*registry.Location, error) {
	q := req.Query
	if err := validateLogOptions(q); err != nil {
		return nil, err
	}
	pod, err := getPod(ctx, req.Objects, req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	container, err := resolveContainer(pod, q.Get("container"))
	if err != nil {
		return nil, err
	}
	previous := isTrue(q.Get("previous"))
	st, ok := containerStatus(pod, container)
	switch {
	case previous && (!ok || st.LastTerminationState.Terminated == nil):
		return nil, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod.Name))
	case !previous && (!ok || (st.State.Waiting != nil && st.LastTerminationState.Terminated == nil)):
		reason := "ContainerCreating"
		if ok && st.State.Waiting.Reason != "" {
			reason = st.State.Waiting.Reason
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: %s", container, pod.Name, reason))
	}
	base, err := nodeURL(ctx, req.Objects, pod)
	if err != nil {
		return nil, err
	}
	out := url.Values{}
	for _, k := range []string{"follow", "previous", "timestamps", "tailLines", "sinceSeconds", "sinceTime", "limitBytes"} {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	base.Path = fmt.Sprintf("/containerLogs/%s/%s/%s/%s", pod.Namespace, pod.Name, pod.UID, container)
	base.RawQuery = out.Encode()
	return &registry.Location{URL: base, Backend: registry.BackendNode, DialError: "error dialing backend"}, nil
}

// isTrue reads a boolean query parameter as the API server does.
func isTrue(v string) bool { return v == "true" || v == "1" }

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

// podCommandLocation serves pods/NAME/exec and pods/NAME/attach (GET for WebSocket
// clients, POST for SPDY): it checks the container, then hands the upgrade to the node.
func podCommandLocation(kind string) func(ctx context.Context, req *registry.HandlerRequest) (*registry.Location, error) {
	return func(ctx context.Context, req *registry.HandlerRequest) (*registry.Location, error) {
		pod, err := getPod(ctx, req.Objects, req.Namespace, req.Name)
		if err != nil {
			return nil, err
		}
		q := req.Query
		container, err := resolveContainer(pod, q.Get("container"))
		if err != nil {
			return nil, err
		}
		if kind == "exec" && len(q["command"]) == 0 {
			return nil, apierrors.NewBadRequest("you must specify at least one command for the container")
		}
		if p := pod.Status.Phase; p == v1.PodSucceeded || p == v1.PodFailed {
			verb := "exec into"
			if kind == "attach" {
				verb = "attach to"
			}
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot %s a container in a completed pod; current phase is %s", verb, p))
		}
		if st, ok := containerStatus(pod, container); !ok || st.State.Running == nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("container not found (%q)", container))
		}
		base, err := nodeURL(ctx, req.Objects, pod)
		if err != nil {
			return nil, err
		}
		base.Path = fmt.Sprintf("/%s/%s/%s/%s/%s", kind, pod.Namespace, pod.Name, pod.UID, container)
		base.RawQuery = req.RawQuery
		return &registry.Location{URL: base, Backend: registry.BackendNode, DialError: "error dialing backend"}, nil
	}
}

// podPortForwardLocation serves pods/NAME/portforward.
func podPortForwardLocation(ctx context.Context, req *registry.HandlerRequest) (*registry.Location, error) {
	pod, err := getPod(ctx, req.Objects, req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	if pod.Status.Phase != v1.PodRunning {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to forward port because pod is not running. Current status=%s", pod.Status.Phase))
	}
	base, err := nodeURL(ctx, req.Objects, pod)
	if err != nil {
		return nil, err
	}
	base.Path = fmt.Sprintf("/portForward/%s/%s/%s", pod.Namespace, pod.Name, pod.UID)
	base.RawQuery = req.RawQuery
	return &registry.Location{URL: base, Backend: registry.BackendNode, DialError: "error dialing backend"}, nil
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
func proxyRest(path string) string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 8)
	if len(parts) < 8 || parts[7] == "" {
		return "/"
	}
	return "/" + parts[7]
}

// podProxyLocation serves pods/NAME[:PORT]/proxy/...: HTTP to the pod's address.
func podProxyLocation(ctx context.Context, req *registry.HandlerRequest) (*registry.Location, error) {
	scheme, name, port := proxyTarget(req.Name)
	pod, err := getPod(ctx, req.Objects, req.Namespace, name)
	if err != nil {
		return nil, err
	}
	if pod.Status.PodIP == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no IP address yet", pod.Name))
	}
	if port == "" {
		port = defaultPodProxyPort(pod, scheme)
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
			return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s has no port named %q", pod.Name, port))
		}
		port = named
	}
	if scheme == "" {
		scheme = "http"
	}
	target := &url.URL{Scheme: scheme, Host: net.JoinHostPort(pod.Status.PodIP, port), Path: proxyRest(req.Path), RawQuery: req.RawQuery}
	return &registry.Location{URL: target, Backend: registry.BackendPod, DialError: "error trying to reach pod"}, nil
}
