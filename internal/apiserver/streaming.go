package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func (s *Server) transports() (*streamTransports, error) {
	if s.streams == nil {
		return nil, apierrors.NewServiceUnavailable("this API server is not configured to reach nodes and pods")
	}
	return s.streams, nil
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
