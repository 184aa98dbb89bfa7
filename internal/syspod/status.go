package syspod

import (
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ServeStatus serves a system pod's metrics and probes on ln until the returned func
// closes it: /metrics from reg; livePath (the liveness probe's path) answering body
// while the process runs; /ready answering body once synced reports true (the
// informer caches are filled), else 503. body is what the peer the pod stands in for
// answers ("OK" for CoreDNS, "ok" for ingress controllers).
func ServeStatus(ln net.Listener, reg prometheus.Gatherer, livePath, body string, synced func() bool) (closeFn func() error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc(livePath, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) })
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(body))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return hs.Close
}
