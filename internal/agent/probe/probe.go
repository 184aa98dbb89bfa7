// Package probe runs a container's liveness, readiness and startup probes the way kubelet
// does (httpGet, tcpSocket, exec, grpc) and keeps, per probe, the state machine that turns
// single outcomes into a result (initial delay, period, thresholds, startup gating).
//
// Connections go through an injected dial function, so the agent dials from the node's
// network namespace as kubelet does: an application listening on 127.0.0.1 only inside its
// pod is unreachable at the pod IP, and its probes fail.
package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Result is the outcome of one probe.
type Result int

const (
	// Unknown means the probe could not be run (bad port, no exec hook, ...). Kubelet
	// throws such outcomes away instead of counting them as failures.
	Unknown Result = iota
	// Success means the container passed the probe.
	Success
	// Failure means the container failed the probe.
	Failure
)

// String returns the result as kubelet logs it.
func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	default:
		return "unknown"
	}
}

// UserAgent is the User-Agent of HTTP and gRPC probes, the one kubelet 1.32 sends.
const UserAgent = "kube-probe/1.32"

// maxBodyLength bounds what is read of an HTTP response or an exec probe's output.
const maxBodyLength = 10 * 1024

// maxRedirects is how many same-host redirects an HTTP probe follows.
const maxRedirects = 10

// Prober runs probes. The zero value dials with net.DialTimeout from the caller's network
// namespace and has no exec support.
type Prober struct {
	// Dial opens a connection to addr ("host:port") within timeout. The agent passes a
	// dialer bound to the node's network namespace.
	Dial func(network, addr string, timeout time.Duration) (net.Conn, error)
	// Exec runs cmd in the named container and returns its exit code and combined
	// output; err is for a command that could not be run at all. It must return when
	// ctx is done (the probe's timeout), with ctx.Err() among its error chain.
	Exec func(ctx context.Context, container string, cmd []string) (exitCode int, output []byte, err error)
}

// Probe runs p once against container of pod, whose IP is podIP, and returns the result
// and a message in kubelet's words (what the "Liveness probe failed: ..." events say).
// A 3xx answer that is not followed counts as Success with a message saying so.
func (pr *Prober) Probe(ctx context.Context, p *v1.Probe, pod *v1.Pod, container *v1.Container, podIP string) (Result, string) {
	if p == nil {
		return Unknown, "no probe given"
	}
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	switch {
	case p.Exec != nil:
		return pr.exec(ctx, p.Exec, container, timeout)
	case p.HTTPGet != nil:
		return pr.httpGet(ctx, p.HTTPGet, container, podIP, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, container)
		if err != nil {
			return Unknown, err.Error()
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		conn, err := pr.dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return Failure, err.Error()
		}
		_ = conn.Close()
		return Success, ""
	case p.GRPC != nil:
		port := int(p.GRPC.Port)
		if port <= 0 || port > 65535 {
			return Unknown, fmt.Sprintf("invalid port number: %v", port)
		}
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return pr.grpc(ctx, podIP, port, service, timeout)
	}
	name := "<nil>"
	if container != nil {
		name = container.Name
	}
	return Unknown, fmt.Sprintf("missing probe handler for %s:%s", podName(pod), name)
}

func podName(pod *v1.Pod) string {
	if pod == nil {
		return "<nil>"
	}
	return pod.Namespace + "/" + pod.Name
}

// dial uses the injected dialer, or the caller's namespace when there is none.
func (pr *Prober) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if pr.Dial != nil {
		return pr.Dial(network, addr, timeout)
	}
	return net.DialTimeout(network, addr, timeout)
}

// resolvePort turns a probe port (a number, a container port name, or a number written
// as a string) into a port number, as kubelet does.
func resolvePort(param intstr.IntOrString, container *v1.Container) (int, error) {
	port := -1
	switch param.Type {
	case intstr.Int:
		port = param.IntValue()
	case intstr.String:
		found := false
		if container != nil {
			for _, p := range container.Ports {
				if p.Name == param.StrVal {
					port, found = int(p.ContainerPort), true
					break
				}
			}
		}
		if !found {
			n, err := strconv.Atoi(param.StrVal)
			if err != nil {
				return -1, fmt.Errorf("port %s not found", param.StrVal)
			}
			port = n
		}
	default:
		return -1, fmt.Errorf("intOrString had no kind: %+v", param)
	}
	if port > 0 && port < 65536 {
		return port, nil
	}
	return port, fmt.Errorf("invalid port number: %v", port)
}

// exec runs an exec probe: exit code 0 is success, any other a failure whose message is
// the command's output.
func (pr *Prober) exec(ctx context.Context, action *v1.ExecAction, container *v1.Container, timeout time.Duration) (Result, string) {
	if pr.Exec == nil {
		return Unknown, "exec probes are not supported by this prober"
	}
	if container == nil {
		return Unknown, "exec probe without a container"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, out, err := pr.Exec(ctx, container.Name, action.Command)
	if len(out) > maxBodyLength {
		out = out[:maxBodyLength]
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return Failure, fmt.Sprintf("command %q timed out", strings.Join(action.Command, " "))
		}
		return Unknown, err.Error()
	}
	if code != 0 {
		return Failure, string(out)
	}
	return Success, string(out)
}

// httpGet runs an HTTP probe: 2xx is success, 3xx to another host is success with a
// warning (redirects are followed only on the same host), anything else a failure.
func (pr *Prober) httpGet(ctx context.Context, action *v1.HTTPGetAction, container *v1.Container, podIP string, timeout time.Duration) (Result, string) {
	req, err := newHTTPRequest(ctx, action, container, podIP)
	if err != nil {
		return Unknown, err.Error()
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
				return pr.dial(network, addr, timeout)
			},
			// Probes check the container, not its certificate, and never keep a
			// connection between two probes.
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		},
	}
	res, err := client.Do(req)
	if err != nil {
		return Failure, err.Error()
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBodyLength))
	if err != nil {
		return Failure, err.Error()
	}
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return Success, fmt.Sprintf("Probe terminated redirects, Response body: %v", string(body))
		}
		return Success, string(body)
	}
	// Kubelet keeps the body out of the message: it could carry secrets into events.
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode)
}

// newHTTPRequest builds the probe's GET request: scheme (default http), host (default
// the pod IP), port, path, the probe's headers, kubelet's User-Agent and Accept unless
// the probe sets them (an empty Accept removes it), and the Host header as the
// request's host.
func newHTTPRequest(ctx context.Context, action *v1.HTTPGetAction, container *v1.Container, podIP string) (*http.Request, error) {
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := action.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(action.Port, container)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(action.Path)
	if err != nil {
		u = &url.URL{Path: action.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("http probe to %s: %w", u, err)
	}
	headers := http.Header{}
	for _, h := range action.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", UserAgent)
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}
