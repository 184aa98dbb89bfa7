package dns

import (
	"strconv"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics carries CoreDNS's metric names and labels, so dashboards and alerts written
// for CoreDNS read tranche-dns unchanged.
type metrics struct {
	requests      *prometheus.CounterVec   // server, zone, view, proto, family, type
	responses     *prometheus.CounterVec   // server, zone, view, rcode, plugin
	duration      *prometheus.HistogramVec // server, zone, view, type
	requestSize   *prometheus.HistogramVec // server, zone, view, proto
	responseSize  *prometheus.HistogramVec // server, zone, view, proto
	cacheHits     *prometheus.CounterVec   // server, type, zones, view
	cacheMisses   *prometheus.CounterVec   // server, zones, view
	cacheEntries  *prometheus.GaugeVec     // server, type, zones, view
	fwdRequests   *prometheus.CounterVec   // to
	fwdResponses  *prometheus.CounterVec   // to, rcode
	autopath      *prometheus.CounterVec   // server
	panics        prometheus.Counter
	server        string
	zoneLabel     string
	zoneCacheName string
}

func newMetrics(reg prometheus.Registerer, server, origin string) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "dns", Name: "requests_total",
			Help: "Counter of DNS requests made per zone, protocol and family."}, []string{"server", "zone", "view", "proto", "family", "type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "dns", Name: "responses_total",
			Help: "Counter of response status codes."}, []string{"server", "zone", "view", "rcode", "plugin"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "coredns", Subsystem: "dns", Name: "request_duration_seconds",
			Help:    "Histogram of the time (in seconds) each request took per zone.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16)}, []string{"server", "zone", "view", "type"}),
		requestSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "coredns", Subsystem: "dns", Name: "request_size_bytes",
			Help: "Size of the request in bytes, per zone and protocol.", Buckets: sizeBuckets},
			[]string{"server", "zone", "view", "proto"}),
		responseSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "coredns", Subsystem: "dns", Name: "response_size_bytes",
			Help: "Size of the answer in bytes, per zone and protocol.", Buckets: sizeBuckets},
			[]string{"server", "zone", "view", "proto"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "cache", Name: "hits_total",
			Help: "The count of cache hits."}, []string{"server", "type", "zones", "view"}),
		cacheMisses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "cache", Name: "misses_total",
			Help: "The count of cache misses."}, []string{"server", "zones", "view"}),
		cacheEntries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "coredns", Subsystem: "cache", Name: "entries",
			Help: "The number of elements in the cache."}, []string{"server", "type", "zones", "view"}),
		fwdRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "forward", Name: "requests_total",
			Help: "Counter of requests made per upstream."}, []string{"to"}),
		fwdResponses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "forward", Name: "responses_total",
			Help: "Counter of responses received per upstream."}, []string{"to", "rcode"}),
		autopath: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "autopath", Name: "success_total",
			Help: "Counter of requests that did autopath."}, []string{"server"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "coredns", Name: "panics_total",
			Help: "A metrics that counts the number of panics."}),
		server:        server,
		zoneLabel:     origin,
		zoneCacheName: ".",
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.responses, m.duration, m.requestSize, m.responseSize, m.cacheHits, m.cacheMisses, m.cacheEntries,
			m.fwdRequests, m.fwdResponses, m.autopath, m.panics)
	}
	return m
}

// sizeBuckets are CoreDNS's buckets for message sizes: around the classic 512-byte UDP
// limit, EDNS0 buffer sizes and up to TCP's 64 KiB.
var sizeBuckets = []float64{0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3}

// typeLabel is CoreDNS's "type" label: the common types by name, the rest as "other".
func typeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeNS,
		dns.TypeSOA, dns.TypeMX, dns.TypeANY, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeDS, dns.TypeDNSKEY,
		dns.TypeAXFR, dns.TypeIXFR, dns.TypeCAA, dns.TypeNAPTR, dns.TypeOPT:
		return dns.TypeToString[t]
	}
	return "other"
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return strconv.Itoa(rc)
}
