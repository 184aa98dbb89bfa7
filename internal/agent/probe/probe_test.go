package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// serve starts an HTTP server on addr (loopback) and returns its port.
func serve(t *testing.T, addr string, h http.Handler, h2c bool) int {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func makePod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
}

func makeContainer(mutate func(*v1.Container)) *v1.Container {
	c := &v1.Container{Name: "app"}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestHTTPGet(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	var seenHost string
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen, seenHost = r.Header.Clone(), r.Host
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "secret detail", http.StatusInternalServerError)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/healthz", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:1/x", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 3*maxBodyLength))
	})
	port := serve(t, "127.0.0.1:0", mux, false)
	// An application listening on 127.0.0.1 only, as in the seed's pitfall: reachable
	// from inside its pod, refused at the pod's address.
	localOnly := serve(t, "127.0.0.1:0", mux, false)

	httpProbe := func(path string, port intstr.IntOrString, mutate func(*v1.HTTPGetAction)) *v1.Probe {
		a := &v1.HTTPGetAction{Path: path, Port: port}
		if mutate != nil {
			mutate(a)
		}
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: a}, TimeoutSeconds: 1}
	}
	named := makeContainer(func(c *v1.Container) {
		c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}
	})
	tests := []struct {
		name      string
		probe     *v1.Probe
		container *v1.Container
		podIP     string
		want      Result
		wantMsg   string
		check     func(t *testing.T)
	}{{
		name:    "200 is success",
		probe:   httpProbe("/healthz", intstr.FromInt32(int32(port)), nil),
		podIP:   "127.0.0.1",
		want:    Success,
		wantMsg: "ok",
		check: func(t *testing.T) {
			mu.Lock()
			defer mu.Unlock()
			if got := seen.Get("User-Agent"); got != "kube-probe/1.32" {
				t.Errorf("User-Agent = %q", got)
			}
			if got := seen.Get("Accept"); got != "*/*" {
				t.Errorf("Accept = %q", got)
			}
		},
	}, {
		name:    "named port",
		probe:   httpProbe("/healthz", intstr.FromString("http"), nil),
		podIP:   "127.0.0.1",
		want:    Success,
		wantMsg: "ok",
	}, {
		name:    "port number written as a string",
		probe:   httpProbe("/healthz", intstr.FromString(strconv.Itoa(port)), nil),
		podIP:   "127.0.0.1",
		want:    Success,
		wantMsg: "ok",
	}, {
		name: "headers and Host",
		probe: httpProbe("/healthz", intstr.FromInt32(int32(port)), func(a *v1.HTTPGetAction) {
			a.HTTPHeaders = []v1.HTTPHeader{{Name: "Host", Value: "api.example"}, {Name: "x-custom", Value: "1"}, {Name: "Accept", Value: ""}}
		}),
		podIP:   "127.0.0.1",
		want:    Success,
		wantMsg: "ok",
		check: func(t *testing.T) {
			mu.Lock()
			defer mu.Unlock()
			if seenHost != "api.example" || seen.Get("X-Custom") != "1" || seen.Get("Accept") != "" {
				t.Errorf("host %q headers %v", seenHost, seen)
			}
		},
	}, {
		name:    "explicit host and scheme case",
		probe:   httpProbe("/healthz", intstr.FromInt32(int32(port)), func(a *v1.HTTPGetAction) { a.Host = "127.0.0.1"; a.Scheme = v1.URISchemeHTTP }),
		podIP:   "192.0.2.1",
		want:    Success,
		wantMsg: "ok",
	}, {
		name:    "500 is failure without the body",
		probe:   httpProbe("/fail", intstr.FromInt32(int32(port)), nil),
		podIP:   "127.0.0.1",
		want:    Failure,
		wantMsg: "HTTP probe failed with statuscode: 500",
	}, {
		name:    "same-host redirect is followed",
		probe:   httpProbe("/moved", intstr.FromInt32(int32(port)), nil),
		podIP:   "127.0.0.1",
		want:    Success,
		wantMsg: "ok",
	}, {
		name:    "redirect to another host is not followed",
		probe:   httpProbe("/elsewhere", intstr.FromInt32(int32(port)), nil),
		podIP:   "127.0.0.1",
		want:    Success,
		wantMsg: "Probe terminated redirects, Response body: <a href=\"http://localhost:1/x\">Found</a>.\n\n",
	}, {
		name:    "redirect loop",
		probe:   httpProbe("/loop", intstr.FromInt32(int32(port)), nil),
		podIP:   "127.0.0.1",
		want:    Failure,
		wantMsg: fmt.Sprintf(`Get "/loop": stopped after %d redirects`, maxRedirects),
	}, {
		name:    "app listening on 127.0.0.1 only fails at the pod IP",
		probe:   httpProbe("/healthz", intstr.FromInt32(int32(localOnly)), nil),
		podIP:   "127.0.0.2",
		want:    Failure,
		wantMsg: fmt.Sprintf(`Get "http://127.0.0.2:%d/healthz": dial tcp 127.0.0.2:%d: connect: connection refused`, localOnly, localOnly),
	}, {
		name:    "unknown named port",
		probe:   httpProbe("/healthz", intstr.FromString("metrics"), nil),
		podIP:   "127.0.0.1",
		want:    Unknown,
		wantMsg: "port metrics not found",
	}, {
		name:    "port out of range",
		probe:   httpProbe("/healthz", intstr.FromInt32(70000), nil),
		podIP:   "127.0.0.1",
		want:    Unknown,
		wantMsg: "invalid port number: 70000",
	}}
	pr := &Prober{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.container
			if c == nil {
				c = named
			}
			got, msg := pr.Probe(context.Background(), tt.probe, makePod(), c, tt.podIP)
			if got != tt.want || msg != tt.wantMsg {
				t.Errorf("Probe = %v, %q; want %v, %q", got, msg, tt.want, tt.wantMsg)
			}
			if tt.check != nil {
				tt.check(t)
			}
		})
	}

	t.Run("body is read up to 10 KiB", func(t *testing.T) {
		got, msg := pr.Probe(context.Background(), httpProbe("/big", intstr.FromInt32(int32(port)), nil), makePod(), named, "127.0.0.1")
		if got != Success || len(msg) != maxBodyLength {
			t.Errorf("Probe = %v, %d bytes; want success, %d bytes", got, len(msg), maxBodyLength)
		}
	})
}

func TestHTTPGetTimeout(t *testing.T) {
	release := make(chan struct{})
	port := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}), false)
	defer close(release)
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(int32(port))}}, TimeoutSeconds: 1}
	got, msg := (&Prober{}).Probe(context.Background(), p, makePod(), makeContainer(nil), "127.0.0.1")
	if got != Failure || !strings.Contains(msg, "Client.Timeout exceeded while awaiting headers") {
		t.Errorf("Probe = %v, %q; want a timeout failure", got, msg)
	}
}

func TestTCPSocketAndDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	open := l.Addr().(*net.TCPAddr).Port
	closedL, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := closedL.Addr().(*net.TCPAddr).Port
	_ = closedL.Close()

	var dialed []string
	pr := &Prober{Dial: func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dialed = append(dialed, network+" "+addr+" "+timeout.String())
		return net.DialTimeout(network, addr, timeout)
	}}
	tcp := func(host string, port int) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: host, Port: intstr.FromInt32(int32(port))}}, TimeoutSeconds: 2}
	}
	tests := []struct {
		name    string
		probe   *v1.Probe
		want    Result
		wantMsg string
		dialed  string
	}{{
		name:   "open port",
		probe:  tcp("", open),
		want:   Success,
		dialed: fmt.Sprintf("tcp 127.0.0.1:%d 2s", open),
	}, {
		name:    "closed port",
		probe:   tcp("", closed),
		want:    Failure,
		wantMsg: fmt.Sprintf("dial tcp 127.0.0.1:%d: connect: connection refused", closed),
		dialed:  fmt.Sprintf("tcp 127.0.0.1:%d 2s", closed),
	}, {
		name:    "127.0.0.1-only listener at another address",
		probe:   tcp("127.0.0.3", open),
		want:    Failure,
		wantMsg: fmt.Sprintf("dial tcp 127.0.0.3:%d: connect: connection refused", open),
		dialed:  fmt.Sprintf("tcp 127.0.0.3:%d 2s", open),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialed = nil
			got, msg := pr.Probe(context.Background(), tt.probe, makePod(), makeContainer(nil), "127.0.0.1")
			if got != tt.want || msg != tt.wantMsg {
				t.Errorf("Probe = %v, %q; want %v, %q", got, msg, tt.want, tt.wantMsg)
			}
			if len(dialed) != 1 || dialed[0] != tt.dialed {
				t.Errorf("dialed %q, want [%q]", dialed, tt.dialed)
			}
		})
	}
}

func TestExec(t *testing.T) {
	execProbe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}}, TimeoutSeconds: 1}
	tests := []struct {
		name    string
		exec    func(ctx context.Context, container string, cmd []string) (int, []byte, error)
		want    Result
		wantMsg string
	}{{
		name:    "exit 0",
		exec:    func(context.Context, string, []string) (int, []byte, error) { return 0, []byte("fine\n"), nil },
		want:    Success,
		wantMsg: "fine\n",
	}, {
		name: "exit 1",
		exec: func(context.Context, string, []string) (int, []byte, error) {
			return 1, []byte("cat: can't open '/tmp/healthy': No such file or directory\n"), nil
		},
		want:    Failure,
		wantMsg: "cat: can't open '/tmp/healthy': No such file or directory\n",
	}, {
		name: "timeout",
		exec: func(ctx context.Context, _ string, _ []string) (int, []byte, error) {
			<-ctx.Done()
			return -1, nil, fmt.Errorf("killed: %w", ctx.Err())
		},
		want:    Failure,
		wantMsg: `command "cat /tmp/healthy" timed out`,
	}, {
		name: "cannot run",
		exec: func(context.Context, string, []string) (int, []byte, error) {
			return -1, nil, errors.New("container app is not running")
		},
		want:    Unknown,
		wantMsg: "container app is not running",
	}, {
		name:    "no exec support",
		want:    Unknown,
		wantMsg: "exec probes are not supported by this prober",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := &Prober{Exec: tt.exec}
			ctx := context.Background()
			if tt.name == "timeout" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 10*time.Millisecond)
				defer cancel()
			}
			got, msg := pr.Probe(ctx, execProbe, makePod(), makeContainer(nil), "10.244.0.5")
			if got != tt.want || msg != tt.wantMsg {
				t.Errorf("Probe = %v, %q; want %v, %q", got, msg, tt.want, tt.wantMsg)
			}
		})
	}
}

// grpcHealth answers grpc.health.v1.Health/Check with the status set per service name.
func grpcHealth(statuses map[string]uint64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/grpc.health.v1.Health/Check" || r.Header.Get("Content-Type") != "application/grpc" {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "12")
			w.Header().Set("Grpc-Message", "unknown service grpc.health.v1.Health")
			return
		}
		body, _ := io.ReadAll(r.Body)
		service := ""
		if len(body) > 7 {
			service = string(body[7:])
		}
		status, ok := statuses[service]
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		if !ok {
			w.Header().Set("Grpc-Status", "5")
			w.Header().Set("Grpc-Message", "unknown service")
			return
		}
		msg := binary.AppendUvarint([]byte{0x08}, status)
		_, _ = w.Write(grpcFrame(msg))
		w.Header().Set("Grpc-Status", "0")
	})
}

func TestGRPC(t *testing.T) {
	port := serve(t, "127.0.0.1:0", grpcHealth(map[string]uint64{"": 1, "db": 2}), true)
	notGRPC := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "12")
		w.Header().Set("Grpc-Message", "unknown service grpc.health.v1.Health")
	}), true)
	grpcProbe := func(port int, service *string) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port), Service: service}}, TimeoutSeconds: 1}
	}
	tests := []struct {
		name    string
		probe   *v1.Probe
		want    Result
		wantMsg string
	}{{
		name:    "serving",
		probe:   grpcProbe(port, nil),
		want:    Success,
		wantMsg: "service healthy",
	}, {
		name:    "not serving",
		probe:   grpcProbe(port, new("db")),
		want:    Failure,
		wantMsg: `service unhealthy (responded with "NOT_SERVING")`,
	}, {
		name:    "unknown service",
		probe:   grpcProbe(port, new("cache")),
		want:    Failure,
		wantMsg: "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service",
	}, {
		name:    "no health service",
		probe:   grpcProbe(notGRPC, nil),
		want:    Failure,
		wantMsg: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health",
	}, {
		name:    "invalid port",
		probe:   grpcProbe(0, nil),
		want:    Unknown,
		wantMsg: "invalid port number: 0",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := (&Prober{}).Probe(context.Background(), tt.probe, makePod(), makeContainer(nil), "127.0.0.1")
			if got != tt.want || msg != tt.wantMsg {
				t.Errorf("Probe = %v, %q; want %v, %q", got, msg, tt.want, tt.wantMsg)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		got, msg := (&Prober{}).Probe(context.Background(), grpcProbe(port, nil), makePod(), makeContainer(nil), "127.0.0.4")
		if got != Failure || !strings.HasPrefix(msg, `error: failed to connect service at "127.0.0.4:`) {
			t.Errorf("Probe = %v, %q; want a connection failure", got, msg)
		}
	})
}

func TestNoHandler(t *testing.T) {
	got, msg := (&Prober{}).Probe(context.Background(), &v1.Probe{}, makePod(), makeContainer(nil), "10.0.0.1")
	if got != Unknown || msg != "missing probe handler for ns/web:app" {
		t.Errorf("Probe = %v, %q", got, msg)
	}
}
