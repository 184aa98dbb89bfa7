package ingress

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
)

// probeBackend answers by path: /echo tells what it received, the others answer with a
// framing or behaviour the proxy must carry through.
func probeBackend(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			var hdr []string
			for k, vs := range r.Header {
				hdr = append(hdr, k+": "+strings.Join(vs, ", "))
			}
			sort.Strings(hdr)
			fmt.Fprintf(w, "%s %s len=%d body=%s te=%v\nHost: %s\n%s\n", r.Method, r.URL.RequestURI(), r.ContentLength, body,
				r.TransferEncoding, r.Host, strings.Join(hdr, "\n"))
		case "/chunked":
			w.Header().Set("Trailer", "X-Sum")
			_, _ = io.WriteString(w, "ab")
			http.NewResponseController(w).Flush()
			_, _ = io.WriteString(w, "cd")
			w.Header().Set("X-Sum", "4")
		case "/big":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			if r.URL.Query().Get("chunked") == "" {
				w.Header().Set("Content-Length", strconv.Itoa(n))
			}
			for i := 0; i < n; i += len(bigPattern) {
				_, _ = io.WriteString(w, bigPattern[:min(len(bigPattern), n-i)])
			}
		case "/bighead":
			n := 10000
			if q := r.URL.Query().Get("n"); q != "" {
				n, _ = strconv.Atoi(q)
			}
			w.Header().Set("X-Big", strings.Repeat("b", n))
			_, _ = io.WriteString(w, "big")
		case "/notmod":
			w.WriteHeader(http.StatusNotModified)
		case "/hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "done")
		case "/hop":
			w.Header().Set("Connection", "X-Drop")
			w.Header().Set("X-Drop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("Proxy-Authenticate", "Basic")
			w.Header().Set("X-Keep", "1")
			_, _ = io.WriteString(w, "hop")
		case "/cut", "/close", "/ws":
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			switch r.URL.Path {
			case "/cut":
				fmt.Fprint(brw, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
			case "/close":
				fmt.Fprint(brw, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil-close body")
			case "/ws":
				fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				_ = brw.Flush()
				line, _ := brw.ReadString('\n')
				fmt.Fprint(brw, "echo "+line)
			}
			_ = brw.Flush()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// leanProxy serves Host h.test through Serve to backend, with bodies limited to 100 bytes.
func leanProxy(t *testing.T, backend string) addrs {
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = []networkingv1.IngressRule{rule("h.test", path("/", prefix, svcBackend("s", 80)))}
	}))
	serviceFor(t, f, "default", "s", backend)
	p := NewProxy(ProxyConfig{MaxBodyBytes: 100, Attempts: 3})
	p.SetTable(Build(f))
	return startServe(t, p, 0)
}

// rawClient speaks HTTP/1.1 on one connection, byte for byte as a test writes it.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, c net.Conn) *rawClient {
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
}

func (rc *rawClient) send(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

// answer is one response as the client saw it.
type answer struct {
	status  int
	header  http.Header
	body    string
	bodyErr error
	trailer http.Header
	close   bool
}

func (rc *rawClient) read(method string) answer {
	rc.t.Helper()
	resp, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	if err != nil {
		rc.t.Fatalf("reading an answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), bodyErr: err, trailer: resp.Trailer, close: resp.Close}
}

// closed reports whether the proxy closed the connection (no more bytes, EOF).
func (rc *rawClient) closed() bool {
	_, err := rc.br.ReadByte()
	return err == io.EOF
}

// bigPattern is what /big answers with, repeated: a shifted or lost piece shows.
const bigPattern = "0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ!\n"

func bigBody(n int) string {
	return strings.Repeat(bigPattern, n/len(bigPattern)+1)[:n]
}

const echoReq = "GET /echo HTTP/1.1\r\nHost: h.test\r\n\r\n"

func TestLeanPath(t *testing.T) {
	backend := probeBackend(t)
	a := leanProxy(t, backend.URL)
	type want struct {
		status  int
		body    []string // substrings of the body
		lacks   []string // not in the body
		header  map[string]string
		trailer map[string]string
		bodyErr bool
		close   bool // Connection: close
		exact   *string
	}
	cases := []struct {
		name    string
		req     string
		methods []string // of the answers to read, in order
		want    []want
		closed  bool // the proxy closes the connection after the answers
	}{{
		name: "GET: X-Forwarded-*, hop-by-hop headers removed",
		req: "GET /echo?q=1 HTTP/1.1\r\nHost: h.test\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: forged\r\nX-Forwarded-Host: forged\r\n" +
			"Connection: keep-alive, X-Secret\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: x\r\nTe: trailers, deflate\r\nX-Keep: k\r\n\r\n",
		methods: []string{"GET"},
		want: []want{{status: 200,
			body:  []string{"GET /echo?q=1 len=0 body= te=[]", "Host: h.test", "X-Forwarded-For: 1.2.3.4, 127.0.0.1", "X-Forwarded-Proto: http", "X-Forwarded-Host: h.test", "X-Keep: k", "Te: trailers"},
			lacks: []string{"X-Secret", "Keep-Alive", "Proxy-Authorization", "forged", "Connection"}}},
	}, {
		name:    "POST with Content-Length",
		req:     "POST /echo HTTP/1.1\r\nHost: h.test\r\nContent-Length: 5\r\n\r\nhello",
		methods: []string{"POST"},
		want:    []want{{status: 200, body: []string{"POST /echo len=5 body=hello te=[]"}}},
	}, {
		name:    "POST chunked",
		req:     "POST /echo HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
		methods: []string{"POST"},
		want:    []want{{status: 200, body: []string{"POST /echo len=-1 body=hello world te=[chunked]"}}},
	}, {
		name:    "POST chunked with a broken chunk size",
		req:     "POST /echo HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
		methods: []string{"POST"},
		want:    []want{{status: 400, body: []string{"bad chunk size line"}, close: true}},
		closed:  true,
	}, {
		name:    "chunked answer with a trailer",
		req:     "GET /chunked HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, body: []string{"abcd"}, trailer: map[string]string{"X-Sum": "4"}}},
	}, {
		name:    "large answer with a Content-Length",
		req:     "GET /big?n=1000000 HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, exact: ptr.To(bigBody(1000000))}},
	}, {
		name:    "large chunked answer",
		req:     "GET /big?n=300000&chunked=1 HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, exact: ptr.To(bigBody(300000))}},
	}, {
		name:    "answer head larger than the backend connection's buffer",
		req:     "GET /bighead HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, body: []string{"big"}, header: map[string]string{"X-Big": strings.Repeat("b", 10000)}}},
	}, {
		name:    "HEAD: no body",
		req:     "HEAD /echo HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"HEAD"},
		want:    []want{{status: 200, lacks: []string{"GET", "HEAD"}}},
	}, {
		name:    "304: no body",
		req:     "GET /notmod HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 304}},
	}, {
		name:    "103 Early Hints, then the answer",
		req:     "GET /hints HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET", "GET"},
		want:    []want{{status: 103, header: map[string]string{"Link": "</a.css>; rel=preload"}}, {status: 200, body: []string{"done"}}},
	}, {
		name:    "hop-by-hop answer headers removed",
		req:     "GET /hop HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, body: []string{"hop"}, header: map[string]string{"X-Keep": "1", "X-Drop": "", "Keep-Alive": "", "Proxy-Authenticate": ""}}},
	}, {
		name:    "Connection: close",
		req:     "GET /echo HTTP/1.1\r\nHost: h.test\r\nConnection: close\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, close: true}},
		closed:  true,
	}, {
		name:    "pipelined requests",
		req:     "GET /echo?n=1 HTTP/1.1\r\nHost: h.test\r\n\r\nPOST /echo?n=2 HTTP/1.1\r\nHost: h.test\r\nContent-Length: 2\r\n\r\nhiGET /echo?n=3 HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET", "POST", "GET"},
		want:    []want{{status: 200, body: []string{"GET /echo?n=1"}}, {status: 200, body: []string{"POST /echo?n=2 len=2 body=hi"}}, {status: 200, body: []string{"GET /echo?n=3"}}},
	}, {
		name: "pipelined requests, a chunked body kept whole between them",
		req: "GET /echo?n=1 HTTP/1.1\r\nHost: h.test\r\n\r\nPOST /echo?n=2 HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"2\r\nhi\r\n3\r\n yo\r\n0\r\n\r\nGET /echo?n=3 HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET", "POST", "GET"},
		want:    []want{{status: 200, body: []string{"GET /echo?n=1"}}, {status: 200, body: []string{"POST /echo?n=2 len=-1 body=hi yo te=[chunked]"}}, {status: 200, body: []string{"GET /echo?n=3"}}},
	}, {
		name:    "backend closes mid-answer",
		req:     "GET /cut HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, body: []string{"0123456789"}, bodyErr: true}},
		closed:  true,
	}, {
		name:    "answer that ends when the backend closes",
		req:     "GET /close HTTP/1.1\r\nHost: h.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, body: []string{"until-close body"}, header: map[string]string{"Connection": ""}}},
	}, {
		name:    "no rule: our 404 page",
		req:     "GET /echo HTTP/1.1\r\nHost: nowhere.test\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 404, body: []string{"no Ingress rule matches host &#34;nowhere.test&#34;"}}},
	}, {
		name:    "413: Content-Length over the limit",
		req:     "POST /echo HTTP/1.1\r\nHost: h.test\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("x", 1000),
		methods: []string{"POST"},
		want:    []want{{status: 413, close: true}},
		closed:  true,
	}, {
		name:    "413: chunked body over the limit",
		req:     "POST /echo HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" + strings.Repeat("x", 100) + "\r\n1\r\nx\r\n0\r\n\r\n",
		methods: []string{"POST"},
		want:    []want{{status: 413, close: true}},
		closed:  true,
	}, {
		name:    "Expect: 100-continue goes to net/http",
		req:     "POST /echo HTTP/1.1\r\nHost: h.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
		methods: []string{"POST"},
		want:    []want{{status: 200, body: []string{"POST /echo len=5 body=hello", "X-Forwarded-Proto: http"}}},
	}, {
		name:    "HTTP/1.0 goes to net/http",
		req:     "GET /echo HTTP/1.0\r\nHost: h.test\r\nConnection: keep-alive\r\n\r\n",
		methods: []string{"GET"},
		want:    []want{{status: 200, body: []string{"GET /echo", "X-Forwarded-For: 127.0.0.1"}}},
	}, {
		name:    "Content-Length and Transfer-Encoding: net/http's rules",
		req:     "POST /echo HTTP/1.1\r\nHost: h.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		methods: []string{"POST"},
		want:    []want{{status: 200, body: []string{"len=-1 body= te=[chunked]"}}},
	}, {
		name:    "a lean request, then an upgrade on the same connection",
		req:     echoReq + "GET /ws HTTP/1.1\r\nHost: h.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
		methods: []string{"GET", "GET"},
		want:    []want{{status: 200, body: []string{"GET /echo"}}, {status: 101}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", a.http)
			if err != nil {
				t.Fatal(err)
			}
			rc := dialRaw(t, c)
			rc.send(tc.req)
			for i, m := range tc.methods {
				got := rc.read(m)
				w := tc.want[i]
				for got.status == http.StatusContinue && w.status != http.StatusContinue {
					got = rc.read(m) // net/http's, and the backend's forwarded
				}
				if got.status != w.status {
					t.Fatalf("answer %d: status %d, want %d (body %q)", i, got.status, w.status, got.body)
				}
				for _, s := range w.body {
					if !strings.Contains(got.body, s) {
						t.Errorf("answer %d: body %q lacks %q", i, got.body, s)
					}
				}
				for _, s := range w.lacks {
					if strings.Contains(got.body, s) {
						t.Errorf("answer %d: body %q has %q", i, got.body, s)
					}
				}
				for k, v := range w.header {
					if g := got.header.Get(k); g != v {
						t.Errorf("answer %d: header %s = %q, want %q", i, k, g, v)
					}
				}
				for k, v := range w.trailer {
					if g := got.trailer.Get(k); g != v {
						t.Errorf("answer %d: trailer %s = %q, want %q", i, k, g, v)
					}
				}
				if w.exact != nil && got.body != *w.exact {
					t.Errorf("answer %d: body of %d bytes differs from the %d sent", i, len(got.body), len(*w.exact))
				}
				if got.close != w.close {
					t.Errorf("answer %d: Connection: close %v, want %v", i, got.close, w.close)
				}
				if (got.bodyErr != nil) != w.bodyErr {
					t.Errorf("answer %d: body error %v, want one: %v", i, got.bodyErr, w.bodyErr)
				}
			}
			if tc.closed {
				if !rc.closed() {
					t.Error("the connection is still open, want it closed")
				}
				return
			}
			if tc.want[len(tc.want)-1].status == http.StatusSwitchingProtocols {
				rc.send("hello\n")
				if line, err := rc.br.ReadString('\n'); err != nil || line != "echo hello\n" {
					t.Errorf("through the upgraded connection: %q, %v", line, err)
				}
				return
			}
			// The connection is still good for another request.
			rc.send(echoReq)
			if got := rc.read("GET"); got.status != 200 || !strings.HasPrefix(got.body, "GET /echo len=0") {
				t.Errorf("next request on the connection: %d %q", got.status, got.body)
			}
		})
	}
}

// TestLeanParse: what the lean path serves and what it hands to net/http.
func TestLeanParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		head string
		lean bool
	}{
		{"GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
		{"POST with Content-Length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n", true},
		{"chunked", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\n\r\n", false},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\n", false},
		{"absolute form", "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", false},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false},
		{"malformed Host", "GET / HTTP/1.1\r\nHost: a<b>\r\n\r\n", false},
		{"Host with a port", "GET / HTTP/1.1\r\nHost: a:8080\r\n\r\n", true},
		{"Upgrade", "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", false},
		{"Expect", "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", false},
		{"Content-Length and chunked", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"two Content-Lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", false},
		{"signed Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", false},
		{"other transfer coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false},
		{"obsolete line folding", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", false},
		{"space before the colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", false},
		{"control character in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n", false},
		{"space in the target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"fragment in the target", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"Content-Length with leading zeros", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 01\r\n\r\n", false},
		{"Content-Length zero", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", true},
		{"lower-case method", "get / HTTP/1.1\r\nHost: a\r\n\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lc leanConn
			var rq request
			if got := lc.parseRequest([]byte(tc.head), &rq); got != tc.lean {
				t.Errorf("parseRequest = %v, want %v", got, tc.lean)
			}
		})
	}
}

// TestLeanStreaming: an answer reaches the client as the backend flushes it.
func TestLeanStreaming(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	a := leanProxy(t, backend.URL)
	c, err := net.Dial("tcp", a.http)
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, c)
	rc.send(echoReq)
	resp, err := http.ReadResponse(rc.br, nil)
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
}

// TestLeanTLS: HTTP/1.1 over TLS, on the lean path and handed to net/http, tells the
// backend the client used https.
func TestLeanTLS(t *testing.T) {
	backend := probeBackend(t)
	a := leanProxy(t, backend.URL)
	for _, tc := range []struct{ name, req string }{
		{"lean", echoReq},
		{"handed to net/http", "POST /echo HTTP/1.1\r\nHost: h.test\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nhi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tls.Dial("tcp", a.https, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			rc := dialRaw(t, c)
			rc.send(tc.req)
			got := rc.read("GET")
			for got.status == http.StatusContinue {
				got = rc.read("GET")
			}
			if got.status != 200 || !strings.Contains(got.body, "X-Forwarded-Proto: https") {
				t.Errorf("got %d %q, want 200 with X-Forwarded-Proto: https", got.status, got.body)
			}
		})
	}
}

// TestRetryOnClosedKeptConnection: a request sent on a kept connection the backend has
// just closed goes again on a fresh connection, whatever its method, when its body can
// be sent again: kept whole, up to 64 kB, with a Content-Length or chunked. On the lean
// path (Serve) and the general one (ServeHTTP).
func TestRetryOnClosedKeptConnection(t *testing.T) {
	var conns atomic.Int32
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, b)
	}))
	backend.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	backend.Start()
	t.Cleanup(backend.Close)
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", backend.URL)
	for _, path := range []string{"lean", "general"} {
		p := NewProxy(ProxyConfig{Attempts: 1})
		p.SetTable(Build(f))
		url := frontURL(t, p, path)
		client := &http.Client{Transport: &http.Transport{}}
		for _, tc := range []struct {
			method, body string
			chunked      bool
		}{
			{method: http.MethodGet},
			{method: http.MethodPost, body: "payload"},
			{method: http.MethodPatch, body: strings.Repeat("p", 20<<10)},
			{method: http.MethodPost, body: "payload", chunked: true},
			{method: http.MethodPatch, body: strings.Repeat("p", 60<<10), chunked: true},
		} {
			name := fmt.Sprintf("%s %s %d bytes", path, tc.method, len(tc.body))
			if tc.chunked {
				name += " chunked"
			}
			t.Run(name, func(t *testing.T) {
				for i := range 2 {
					before := conns.Load()
					var body io.Reader = strings.NewReader(tc.body)
					if tc.chunked {
						body = io.MultiReader(body) // no length known: the client sends chunks
					}
					req, _ := http.NewRequest(tc.method, url+"/", body)
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if want := tc.method + " " + tc.body; resp.StatusCode != 200 || string(b) != want {
						t.Fatalf("request %d: %d %.40q, want 200 %.40q", i, resp.StatusCode, b, want)
					}
					if i == 1 && conns.Load() != before+1 {
						t.Errorf("%d new backend connections for the retried request, want 1", conns.Load()-before)
					}
					// The proxy keeps the connection; the backend closes it meanwhile.
					backend.CloseClientConnections()
				}
			})
		}
	}
}

// TestAnswerHeadLimit: an answer head over 64 kB is refused with 502 and a log line that
// names the backend and the limit, as nginx answers 502 past proxy_buffer_size.
func TestAnswerHeadLimit(t *testing.T) {
	backend := probeBackend(t)
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", backend.URL)
	var logs syncBuffer
	p := NewProxy(ProxyConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p.SetTable(Build(f))
	a := startServe(t, p, 0)
	for _, tc := range []struct {
		name   string
		n      int // bytes of one header's value
		want   int
		logged bool
	}{
		{"60 kB head: passed on", 60000, 200, false},
		{"70 kB head: 502", 70000, 502, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _ := get(t, http.DefaultClient, fmt.Sprintf("http://%s/bighead?n=%d", a.http, tc.n), "h.test", nil)
			if code != tc.want {
				t.Errorf("got %d, want %d", code, tc.want)
			}
			line := `level=WARN msg="backend answer head too large, answering 502" backend=default/s:80`
			if got := strings.Contains(logs.String(), line) && strings.Contains(logs.String(), "limitBytes=65536"); got != tc.logged {
				t.Errorf("log has %q with limitBytes=65536: %v, want %v; log:\n%s", line, got, tc.logged, logs.String())
			}
		})
	}
}

// TestLeanNoRetryOfLargeBody: on the lean path, a body larger than 64 kB goes to the
// backend as it arrives and is not kept: a kept connection the backend closed fails its
// request (502, or the client's connection closed while it sent), with no new connection.
// (The general path retries such a request when sending failed before 64 kB of the body
// were read, which depends on timing.)
func TestLeanNoRetryOfLargeBody(t *testing.T) {
	var conns atomic.Int32
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d", r.Method, len(b))
	}))
	backend.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	backend.Start()
	t.Cleanup(backend.Close)
	_, a, _, _ := proxyTo(t, backend.URL)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked %v", chunked), func(t *testing.T) {
			client := &http.Client{Transport: &http.Transport{}}
			// A fresh kept connection, which the backend then closes.
			if code, body := get(t, client, "http://"+a.http+"/", "h.test", nil); code != 200 {
				t.Fatalf("GET: %d %q", code, body)
			}
			backend.CloseClientConnections()
			before := conns.Load()
			var body io.Reader = strings.NewReader(bigBody(100 << 10))
			if chunked {
				body = io.MultiReader(body)
			}
			resp, err := client.Post("http://"+a.http+"/", "text/plain", body)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadGateway {
					t.Errorf("got %d, want 502 or a closed connection", resp.StatusCode)
				}
			}
			if conns.Load() != before {
				t.Errorf("%d new backend connections, want none: the body cannot be sent again", conns.Load()-before)
			}
		})
	}
}

// TestLeanLargeUpload: bodies larger than every buffer reach the backend whole, with a
// Content-Length and chunked.
func TestLeanLargeUpload(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || string(b) != bigBody(len(b)) {
			http.Error(w, fmt.Sprintf("body of %d bytes differs from the pattern (%v)", len(b), err), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %v", len(b), r.TransferEncoding)
	}))
	t.Cleanup(backend.Close)
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", backend.URL)
	p := NewProxy(ProxyConfig{MaxBodyBytes: 10 << 20})
	p.SetTable(Build(f))
	a := startServe(t, p, 0)
	for _, tc := range []struct {
		name    string
		chunked bool
		want    string
	}{
		{"Content-Length", false, "1000000 []"},
		{"chunked", true, "1000000 [chunked]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(bigBody(1000000))
			if tc.chunked {
				body = io.MultiReader(body) // no length known: the client sends chunks
			}
			resp, err := http.Post("http://"+a.http+"/", "text/plain", body)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != tc.want {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, b, tc.want)
			}
		})
	}
}
