package stats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// Handler serves GET /stats/summary (the Summary as JSON; only_cpu_and_memory is
// accepted and changes nothing, as CPU and memory are all there is) and GET
// /metrics/resource (WriteResourceMetrics). Authentication is the caller's business.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats/summary", p.serveSummary)
	mux.HandleFunc("GET /metrics/resource", p.serveResourceMetrics)
	return mux
}

func (p *Provider) serveSummary(w http.ResponseWriter, r *http.Request) {
	s, err := p.Summary()
	if err != nil {
		p.log.Warn("summary statistics", "err", err)
		http.Error(w, fmt.Sprintf("failed to get node info: %v", err), http.StatusInternalServerError)
		return
	}
	data, err := json.Marshal(s)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

func (p *Provider) serveResourceMetrics(w http.ResponseWriter, r *http.Request) {
	s, err := p.Snapshot()
	if err != nil {
		// Kubelet answers with the error gauges set, not with an error status.
		p.log.Warn("resource metrics", "err", err)
	}
	var buf bytes.Buffer
	if err := WriteResourceMetrics(&buf, s, err != nil); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ResourceMetricsContentType)
	_, _ = w.Write(buf.Bytes())
}
