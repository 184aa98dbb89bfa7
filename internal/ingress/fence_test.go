package ingress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http/httpguts"
	networkingv1 "k8s.io/api/networking/v1"
)

// The lean path's request parser is fenced by net/http: what parseRequest accepts,
// net/http's server must accept with the same meaning (FuzzLeanParse), and the same
// bytes sent through the lean path and through net/http's server with the general path
// must bring the backend the same requests (TestLeanMatchesNetHTTP).

// netHTTPReading is how net/http's server reads a request head: http.ReadRequest and
// the checks its server adds (Host present, single and well-formed; header names and
// values valid). It returns the request, or the error net/http answers 400 for.
func netHTTPReading(head []byte) (*http.Request, error) {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return nil, err
	}
	// ReadRequest moves Host out of the header; the server counts the lines.
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	_, _ = tp.ReadLine()
	header, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	hosts, ok := header["Host"]
	switch {
	case !ok || len(hosts) == 0:
		return nil, errors.New("missing required Host header")
	case len(hosts) > 1:
		return nil, errors.New("too many Host headers")
	case !httpguts.ValidHostHeader(hosts[0]):
		return nil, errors.New("malformed Host header")
	}
	for k, vs := range header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, errors.New("invalid header name")
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, errors.New("invalid header value")
			}
		}
	}
	return r, nil
}

// leanSeeds are request heads worth starting the fuzzer from: what the lean path serves
// and the smuggling shapes it must leave to net/http.
var leanSeeds = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"POST /x?y=1 HTTP/1.1\r\nHost: a:80\r\nContent-Length: 3\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTE: trailers\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
	"G@T / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /%41%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
}

func FuzzLeanParse(f *testing.F) {
	for _, s := range leanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// readHead hands parseRequest a head ending at the first blank line.
		i := bytes.Index(data, crlfcrlf)
		if i < 0 {
			return
		}
		head := data[:i+4]
		var lc leanConn
		var rq request
		if !lc.parseRequest(head, &rq) {
			return
		}
		r, err := netHTTPReading(head)
		if err != nil {
			t.Fatalf("the lean path accepts %q, net/http refuses it: %v", head, err)
		}
		if string(rq.method) != r.Method || string(rq.target) != r.RequestURI || string(rq.host) != r.Host {
			t.Fatalf("%q: lean reads %s %s (Host %q), net/http %s %s (Host %q)", head, rq.method, rq.target, rq.host, r.Method, r.RequestURI, r.Host)
		}
		if rq.chunked != slices.Equal(r.TransferEncoding, []string{"chunked"}) {
			t.Fatalf("%q: lean chunked %v, net/http transfer encoding %q", head, rq.chunked, r.TransferEncoding)
		}
		if !rq.chunked && max(rq.contentLength, 0) != r.ContentLength {
			t.Fatalf("%q: lean Content-Length %d, net/http %d", head, rq.contentLength, r.ContentLength)
		}
	})
}

// FuzzLeanChunked holds the lean path's chunked body reader to net/http's: a body it
// passes on (as it is) must decode with net/http's chunked reader to as many bytes,
// its trailer section must read as net/http reads trailers, and nothing may follow.
func FuzzLeanChunked(f *testing.F) {
	for _, s := range []string{
		"0\r\n\r\n",
		"5\r\nhello\r\n0\r\n\r\n",
		"3;a=\"b;c\"\r\nabc\r\n00\r\nX-T: 1\r\n\r\n",
		"3\nabc\r\n0\r\n\r\n",
		"3\r\nabcd\r\n0\r\n\r\n",
		"fffffffffffffffff\r\n",
		"A \t\r\n0123456789\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var out bytes.Buffer
		pp := pipe{dst: bufio.NewWriter(&out), src: bufio.NewReader(bytes.NewReader(body))}
		total, err := pp.chunked(0)
		if err != nil {
			return
		}
		_ = pp.dst.Flush()
		if !bytes.HasPrefix(body, out.Bytes()) {
			t.Fatalf("%q: passed on %q, not the body as it is", body, out.Bytes())
		}
		br := bufio.NewReader(bytes.NewReader(out.Bytes()))
		data, err := io.ReadAll(httputil.NewChunkedReader(br))
		if err != nil || int64(len(data)) != total {
			t.Fatalf("%q: the lean path reads %d bytes, net/http %d (%v)", body, total, len(data), err)
		}
		if _, err := textproto.NewReader(br).ReadMIMEHeader(); err != nil {
			t.Fatalf("%q: the lean path accepts trailers net/http refuses: %v", body, err)
		}
		if rest, _ := io.ReadAll(br); len(rest) > 0 {
			t.Fatalf("%q: the lean path passed on %q after the body's end", body, rest)
		}
	})
}

// received is one request as the backend saw it, whole.
type received struct {
	Method, URI, Host string
	ContentLength     int64
	TransferEncoding  []string
	Header            http.Header
	Body              string
}

// recordingBackend records every request whose body it could read whole.
type recordingBackend struct {
	mu  sync.Mutex
	got []received
}

func (b *recordingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "broken body", http.StatusBadRequest)
		return
	}
	h := r.Header.Clone()
	// The general path's Transport asks for gzip when the client did not.
	h.Del("Accept-Encoding")
	b.mu.Lock()
	b.got = append(b.got, received{r.Method, r.RequestURI, r.Host, r.ContentLength, r.TransferEncoding, h, string(body)})
	b.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (b *recordingBackend) take() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := b.got
	b.got = nil
	return got
}

// outcome is what one connection's bytes did: the statuses the client read, in order,
// and the requests that reached the backend.
type outcome struct {
	Statuses []int
	Backend  []received
}

// exchangeRaw writes raw on a new connection to addr and reads answers until the
// server closes the connection.
func exchangeRaw(t *testing.T, addr string, raw string) []int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var statuses []int
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("no end of the answers after %v", statuses)
			}
			return statuses
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
}

func TestLeanMatchesNetHTTP(t *testing.T) {
	const maxHeader = 16 << 10
	rec := &recordingBackend{}
	backend := httptest.NewServer(rec)
	t.Cleanup(backend.Close)
	// One rule for every host, so that a request with an odd Host reaches the backend
	// if a path lets it through.
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = []networkingv1.IngressRule{rule("", path("/", prefix, svcBackend("s", 80)))}
	}))
	serviceFor(t, f, "default", "s", backend.URL)
	p := NewProxy(ProxyConfig{MaxBodyBytes: 1 << 20, Attempts: 1})
	p.SetTable(Build(f))
	lean := startServe(t, p, maxHeader).http

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	general := &http.Server{Handler: p, MaxHeaderBytes: maxHeader, ErrorLog: nil}
	go func() { _ = general.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = general.Shutdown(ctx)
	})

	// Every case ends with this request: bytes a broken framing left unread show as
	// an extra request or a broken last one.
	const last = "GET /last HTTP/1.1\r\nHost: h.test\r\nConnection: close\r\n\r\n"
	huge := strings.Repeat("v", 20<<10)
	for _, tc := range []struct {
		name, raw string
		// leanStatuses, when set, are the statuses the lean path answers instead of
		// net/http's, on purpose; what reaches the backend must still be the same.
		leanStatuses []int
	}{
		{"GET", "GET /a?b=c HTTP/1.1\r\nHost: h.test\r\nX-A: 1\r\n\r\n", nil},
		{"POST with a body", "POST /a HTTP/1.1\r\nHost: h.test\r\nContent-Length: 5\r\n\r\nhello", nil},
		{"chunked", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n", nil},
		{"keep-alive pipelining", "GET /1 HTTP/1.1\r\nHost: h.test\r\n\r\nPOST /2 HTTP/1.1\r\nHost: h.test\r\nContent-Length: 2\r\n\r\nhiGET /3 HTTP/1.1\r\nHost: h.test\r\n\r\n", nil},
		{"Connection names a header", "GET /a HTTP/1.1\r\nHost: h.test\r\nConnection: X-Drop\r\nX-Drop: 1\r\nX-Keep: 1\r\n\r\n", nil},
		{"duplicate Content-Length, equal", "POST /a HTTP/1.1\r\nHost: h.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", nil},
		{"duplicate Content-Length, different", "POST /a HTTP/1.1\r\nHost: h.test\r\nContent-Length: 3\r\nContent-Length: 13\r\n\r\nabcGET /smuggled HTTP/1.1\r\nHost: h.test\r\n\r\n", nil},
		{"Content-Length and Transfer-Encoding", "POST /a HTTP/1.1\r\nHost: h.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h.test\r\n\r\n", nil},
		{"Transfer-Encoding and Content-Length", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h.test\r\n\r\n", nil},
		{"Transfer-Encoding twice", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", nil},
		{"Transfer-Encoding not chunked", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: gzip\r\n\r\n", nil},
		{"signed Content-Length", "POST /a HTTP/1.1\r\nHost: h.test\r\nContent-Length: +3\r\n\r\nabc", nil},
		{"hop-by-hop headers", "GET /a HTTP/1.1\r\nHost: h.test\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers, deflate\r\nTrailer: X-T\r\nProxy-Authorization: Basic eA==\r\n\r\n", nil},
		{"client's forwarding headers", "GET /a HTTP/1.1\r\nHost: h.test\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Host: evil.test\r\nX-Forwarded-Proto: https\r\n\r\n", nil},
		{"Content-Length with leading zeros", "POST /a HTTP/1.1\r\nHost: h.test\r\nContent-Length: 003\r\n\r\nabc", nil},
		{"Content-Length list", "POST /a HTTP/1.1\r\nHost: h.test\r\nContent-Length: 3, 3\r\n\r\nabc", nil},
		{"Transfer-Encoding in capitals", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n", nil},
		{"Transfer-Encoding list", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: identity, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", nil},
		{"chunk size with leading zeros and an extension", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n0003;a=\"b;c\"\r\nabc\r\n0\r\n\r\n", nil},
		{"chunked with a trailer", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", nil},
		{"target with a fragment", "GET /a#b HTTP/1.1\r\nHost: h.test\r\n\r\n", nil},
		{"target with escapes", "GET /a%2Fb%20c?x=%41 HTTP/1.1\r\nHost: h.test\r\n\r\n", nil},
		{"value with bytes above ASCII", "GET /a HTTP/1.1\r\nHost: h.test\r\nX-A: caf\xc3\xa9\xff\r\n\r\n", nil},
		{"obsolete line folding", "GET /a HTTP/1.1\r\nHost: h.test\r\nX-A: b\r\n c\r\n\r\n", nil},
		{"folded Content-Length", "POST /a HTTP/1.1\r\nHost: h.test\r\nX-A: b\r\n Content-Length: 3\r\n\r\nabc", nil},
		{"bare LF line ends", "GET /a HTTP/1.1\nHost: h.test\nX-A: 1\n\n", nil},
		{"bare LF in one header line", "GET /a HTTP/1.1\r\nHost: h.test\r\nX-A: 1\nContent-Length: 3\r\n\r\nabc", nil},
		// Both refuse the body; net/http's server finds out while the general path
		// streams it to the backend (502, the backend request aborted), the lean path
		// before sending a small body (400, the client's fault, as for a broken body).
		{"bare LF in a chunk size line", "POST /a HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", []int{400}},
		{"space before the colon", "GET /a HTTP/1.1\r\nHost: h.test\r\nContent-Length : 3\r\n\r\nabc", nil},
		{"invalid method", "G@T /a HTTP/1.1\r\nHost: h.test\r\n\r\n", nil},
		{"malformed Host", "GET /a HTTP/1.1\r\nHost: h.test<x>\r\n\r\n", nil},
		{"Host with a space", "GET /a HTTP/1.1\r\nHost: h test\r\n\r\n", nil},
		{"no Host", "GET /a HTTP/1.1\r\n\r\n", nil},
		{"two Hosts", "GET /a HTTP/1.1\r\nHost: h.test\r\nHost: other\r\n\r\n", nil},
		{"control character in a value", "GET /a HTTP/1.1\r\nHost: h.test\r\nX-A: b\x00c\r\n\r\n", nil},
		{"header larger than the lean buffer", "GET /a HTTP/1.1\r\nHost: h.test\r\nX-Big: " + huge[:10<<10] + "\r\n\r\n", nil},
		{"header larger than the limit", "GET /a HTTP/1.1\r\nHost: h.test\r\nX-Big: " + huge + "\r\n\r\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw + last
			rec.take()
			got := outcome{Statuses: exchangeRaw(t, lean, raw), Backend: rec.take()}
			want := outcome{Statuses: exchangeRaw(t, ln.Addr().String(), raw), Backend: rec.take()}
			if len(want.Statuses) == 0 {
				t.Fatalf("%q: net/http answered nothing", tc.raw)
			}
			if tc.leanStatuses != nil {
				want.Statuses = tc.leanStatuses
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%q: lean path (+) differs from net/http (-):\n%s", tc.raw, diff)
			}
		})
	}
}

// BenchmarkLeanParse measures parseRequest on a typical keep-alive request head.
//
//	go test -run '^$' -bench LeanParse -benchmem ./internal/ingress/
func BenchmarkLeanParse(b *testing.B) {
	head := []byte("GET /api/v1/items?limit=10 HTTP/1.1\r\nHost: shop.example.com:8080\r\nUser-Agent: wrk\r\n" +
		"Accept: */*\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\nX-Request-Id: 0123456789abcdef\r\n\r\n")
	var lc leanConn
	b.ReportAllocs()
	for b.Loop() {
		var rq request
		if !lc.parseRequest(head, &rq) {
			b.Fatal("refused")
		}
	}
}
