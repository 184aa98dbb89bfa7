package ingress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
)

// echoBackend answers with its name, the Host it saw and the X-Forwarded-* headers.
func echoBackend(t *testing.T, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s host=%s xff=%s proto=%s xhost=%s path=%s ae=%s", name, r.Host,
			r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.URL.Path,
			r.Header.Get("Accept-Encoding"))
	}))
	t.Cleanup(s.Close)
	return s
}

// serviceFor adds to f a Service ns/name on port 80 ("http") whose endpoints are addrs
// (host:port each, one slice per address, as ports differ on loopback).
func serviceFor(t *testing.T, f *Fake, ns, name string, addrs ...string) {
	t.Helper()
	f.Add(makeService(ns, name, nil))
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(strings.TrimPrefix(a, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		f.Add(makeSlice(ns, fmt.Sprintf("%s-%d", name, i), name, "http", int32(n), []string{host}, nil))
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

func get(t *testing.T, c *http.Client, url, host string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func seedFake(t *testing.T) *Fake {
	f := NewFake(defaultClass(), seedIngress())
	serviceFor(t, f, "default", "service-web", echoBackend(t, "web").URL)
	serviceFor(t, f, "default", "service-default-page", echoBackend(t, "default").URL)
	f.Add(makeService("default", "service-api", func(s *v1.Service) { s.Spec.Ports[0].Port = 8080 }))
	api := echoBackend(t, "api")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(api.URL, "http://"))
	n, _ := strconv.Atoi(port)
	f.Add(makeSlice("default", "api-1", "service-api", "http", int32(n), []string{"127.0.0.1"}, nil))
	return f
}

func TestProxyRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewProxy(ProxyConfig{Metrics: NewMetrics(reg), MaxBodyBytes: 1 << 20, Attempts: 3})
	p.SetTable(Build(seedFake(t)))
	front := httptest.NewServer(p)
	defer front.Close()
	cases := []struct {
		host, path string
		code       int
		prefix     string
	}{
		{"monapp.example.com", "/web/page", 200, "web host=monapp.example.com xff=1.2.3.4, 127.0.0.1 proto=http xhost=monapp.example.com path=/web/page"},
		{"monapp.example.com:8080", "/api", 200, "api host=monapp.example.com:8080"},
		{"monapp.example.com", "/other", 200, "default "},
		{"elsewhere.test", "/web", 200, "default "},
	}
	// A client that asks for no compression: the backend must not be asked for gzip.
	plain := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	if _, body := get(t, plain, front.URL+"/web", "monapp.example.com", nil); !strings.HasSuffix(body, " ae=") {
		t.Errorf("backend saw %q; want no Accept-Encoding, as the client sent none", body)
	}
	for _, tc := range cases {
		t.Run(tc.host+tc.path, func(t *testing.T) {
			code, body := get(t, front.Client(), front.URL+tc.path, tc.host, map[string]string{"X-Forwarded-For": "1.2.3.4"})
			if code != tc.code || !strings.HasPrefix(body, tc.prefix) {
				t.Errorf("got %d %q, want %d %q...", code, body, tc.code, tc.prefix)
			}
		})
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				got[key] = c.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				got[key] = float64(h.GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"tranche_ingress_requests_total backend=default/service-web:80 code=200 ingress=default/mon-ingress":          2,
		"tranche_ingress_requests_total backend=default/service-api:8080 code=200 ingress=default/mon-ingress":        1,
		"tranche_ingress_requests_total backend=default/service-default-page:80 code=200 ingress=default/mon-ingress": 2,
		"tranche_ingress_request_duration_seconds ingress=default/mon-ingress":                                        5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func TestProxyErrors(t *testing.T) {
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = []networkingv1.IngressRule{rule("h.test",
			path("/missing", prefix, svcBackend("missing", 80)),
			path("/empty", prefix, svcBackend("empty", 80)),
			path("/ok", prefix, svcBackend("ok", 80)))}
	}))
	f.Add(makeService("default", "empty", nil))
	serviceFor(t, f, "default", "ok", echoBackend(t, "ok").URL)
	p := NewProxy(ProxyConfig{MaxBodyBytes: 100})
	p.SetTable(Build(f))
	front := httptest.NewServer(p)
	defer front.Close()
	for _, tc := range []struct {
		path string
		code int
		text string
	}{
		{"/nothing", 404, "no Ingress rule matches host &#34;h.test&#34;"},
		{"/missing", 503, "Service default/missing not found"},
		{"/empty", 503, "has no ready endpoint"},
	} {
		code, body := get(t, front.Client(), front.URL+tc.path, "h.test", nil)
		if code != tc.code || !strings.Contains(body, tc.text) {
			t.Errorf("%s: got %d %q, want %d containing %q", tc.path, code, body, tc.code, tc.text)
		}
	}
	// Bodies over the limit: announced, and streamed without a length.
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(strings.Repeat("x", 1000))
		if chunked {
			body = io.MultiReader(body)
		}
		req, _ := http.NewRequest(http.MethodPost, front.URL+"/ok", body)
		req.Host = "h.test"
		resp, err := front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("body of 1000 bytes (chunked=%v) got %d, want 413", chunked, resp.StatusCode)
		}
	}
}

func TestProxyBalancesAndRetries(t *testing.T) {
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", echoBackend(t, "a").URL, echoBackend(t, "b").URL, deadAddr(t), echoBackend(t, "c").URL)
	p := NewProxy(ProxyConfig{Attempts: 3})
	p.SetTable(Build(f))
	front := httptest.NewServer(p)
	defer front.Close()
	seen := map[string]int{}
	for range 12 {
		code, body := get(t, front.Client(), front.URL+"/", "x", nil)
		if code != 200 {
			t.Fatalf("GET answered %d %q; a dead endpoint must be retried on another", code, body)
		}
		seen[body[:1]]++
	}
	if len(seen) != 3 {
		t.Errorf("answers came from %v, want all of a, b and c", seen)
	}
	// A POST is not idempotent: when it lands on the dead endpoint it fails, once in four.
	if fails := badGatewayPosts(t, front.Client(), front.URL, 4); fails != 1 {
		t.Errorf("%d of 4 POSTs failed, want exactly 1 (the dead endpoint's turn, not retried)", fails)
	}
}

func TestProxyTLSAndHTTP2(t *testing.T) {
	f := seedFake(t)
	f.Add(makeIngress("default", "mon-ingress-tls", 1, func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"monapp.secure.example.com"}, SecretName: "mon-tls-secret"}}
		ing.Spec.Rules = []networkingv1.IngressRule{rule("monapp.secure.example.com", path("/secure-data", prefix, svcBackend("service-web", 80)))}
	}))
	secret := tlsSecret(t, "default", "mon-tls-secret", "monapp.secure.example.com")
	f.Add(secret)
	p := NewProxy(ProxyConfig{})
	p.SetTable(Build(f))
	addr := startServe(t, p, 0)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secret.Data[v1.TLSCertKey])
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr.https)
		},
	}}
	resp, err := client.Get("https://monapp.secure.example.com/secure-data/x")
	if err != nil {
		t.Fatalf("HTTPS with the Secret's certificate: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || !strings.Contains(string(b), "proto=https") {
		t.Errorf("got %s %q, want HTTP/2 and X-Forwarded-Proto https", resp.Proto, b)
	}
	// Another name gets the fallback certificate, which the Secret's CA does not sign.
	_, err = client.Get("https://monapp.example.com/web")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a host without a TLS Secret: err %v, want a certificate error (fallback)", err)
	}
	conn, err := tls.Dial("tcp", addr.https, &tls.Config{ServerName: "monapp.example.com", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; !strings.Contains(cn, "fallback") {
		t.Errorf("fallback certificate CN %q", cn)
	}
}

type addrs struct{ http, https string }

func startServe(t *testing.T, p *Proxy, maxHeader int) addrs {
	t.Helper()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := FallbackCertificate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, p, ServeConfig{HTTP: hl, HTTPS: sl, Fallback: fb, MaxHeaderBytes: maxHeader, Logger: slogDiscard})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return addrs{hl.Addr().String(), sl.Addr().String()}
}

func TestHeaderLimit(t *testing.T) {
	p := NewProxy(ProxyConfig{})
	p.SetTable(Build(seedFake(t)))
	a := startServe(t, p, 1024)
	code, _ := get(t, http.DefaultClient, "http://"+a.http+"/web", "monapp.example.com", map[string]string{"X-Big": strings.Repeat("y", 8000)})
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8 kB header got %d, want 431", code)
	}
	code, _ = get(t, http.DefaultClient, "http://"+a.http+"/web", "monapp.example.com", nil)
	if code != 200 {
		t.Errorf("small header got %d, want 200", code)
	}
}

func TestWebSocketAndStreaming(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "websocket" {
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			line, _ := brw.ReadString('\n')
			fmt.Fprint(brw, "echo "+line)
			brw.Flush()
			return
		}
		fmt.Fprint(w, "first\n")
		http.NewResponseController(w).Flush()
		<-release // the client must see "first" before the answer ends
		fmt.Fprint(w, "second\n")
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", backend.URL)
	p := NewProxy(ProxyConfig{})
	p.SetTable(Build(f))
	front := httptest.NewServer(p)
	defer front.Close()

	resp, err := http.Get(front.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first streamed line %q, %v", line, err)
	}
	close(release)
	if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
		t.Errorf("rest of stream %q", rest)
	}
	resp.Body.Close()

	conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	cr := bufio.NewReader(conn)
	wsResp, err := http.ReadResponse(cr, nil)
	if err != nil || wsResp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answer %v, %v", wsResp, err)
	}
	fmt.Fprint(conn, "hello\n")
	if line, err := cr.ReadString('\n'); err != nil || line != "echo hello\n" {
		t.Errorf("through the upgraded connection: %q, %v", line, err)
	}
}

// resettingAddr is an endpoint that accepts connections and resets each once the request
// has arrived, without an answer: a pod whose server process dies with requests in
// flight, as during a rollout before its endpoint has left the proxy's table.
func resettingAddr(t *testing.T) string {
	return acceptEach(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}).Addr().String()
}

// TestRetryWhenEndpointResets: an idempotent request without a body whose endpoint
// resets the connection before any byte of an answer goes to another endpoint, on a
// fresh connection as on a kept one (nginx's proxy_next_upstream error, which retries
// idempotent requests on errors "passing a request to it, or reading the response
// header"); a POST is not sent again. On the lean path (Serve) and the general one.
func TestRetryWhenEndpointResets(t *testing.T) {
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", echoBackend(t, "a").URL, resettingAddr(t), echoBackend(t, "b").URL)
	for _, path := range []string{"lean", "general"} {
		t.Run(path, func(t *testing.T) {
			p := NewProxy(ProxyConfig{Attempts: 3})
			p.SetTable(Build(f))
			url := frontURL(t, p, path)
			client := &http.Client{Transport: &http.Transport{}}
			for range 9 {
				if code, body := get(t, client, url+"/", "x", nil); code != 200 {
					t.Fatalf("GET answered %d %q; an endpoint that reset must be retried on another", code, body)
				}
			}
			if fails := badGatewayPosts(t, client, url, 3); fails != 1 {
				t.Errorf("%d of 3 POSTs failed, want exactly 1 (the resetting endpoint's turn, not retried)", fails)
			}
		})
	}
}

// frontURL serves p on the lean path (Serve) or the general one (ServeHTTP, through
// httptest) and returns its base URL.
func frontURL(t *testing.T, p *Proxy, path string) string {
	t.Helper()
	if path == "lean" {
		return "http://" + startServe(t, p, 0).http
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return front.URL
}

// badGatewayPosts sends n POSTs to url and counts those answered 502.
func badGatewayPosts(t *testing.T, c *http.Client, url string, n int) int {
	t.Helper()
	fails := 0
	for range n {
		resp, err := c.Post(url+"/", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadGateway {
			fails++
		}
	}
	return fails
}
