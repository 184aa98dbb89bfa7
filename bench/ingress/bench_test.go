// Package ingress benchmarks tranche's Ingress proxy against Debian's nginx configured as
// a reverse proxy to the same three backends, in the same run, with wrk: requests/s and
// p99 latency for plain HTTP with keep-alive and for HTTPS, and each proxy's memory.
//
// Every party is its own process on loopback: the three backends and tranche's proxy are
// this test binary re-executed in a role (BENCH_INGRESS_ROLE), the proxy role running the
// code `tranche ingress` serves with (ingress.NewProxy, ingress.Serve) over a routing
// table built from an in-memory cache instead of the API; nginx runs from a temporary
// configuration. Both proxies route Host bench.test, path / to the three backends, keep
// connections to them alive and run as many workers (nginx worker_processes, tranche's
// GOMAXPROCS). The http and https rows log no requests on either side (nginx
// access_log off, tranche without access log or metrics); the "http, logged" row runs
// both as they are deployed: tranche with its access log (NewAccessLogger, to a file) and
// its Prometheus metrics, nginx with a buffered access log to a file. The proxy runs
// with GOGC=50, as `tranche ingress` does. See README.md.
//
// CPU/req is the proxy's user+system CPU time during a run divided by the requests
// served: on a busy machine, where the proxies share the cores with wrk, the backends
// and whatever else runs, it is the steadier figure of the two.
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 10m ./bench/ingress/
package ingress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tranche/tranche/bench/benchcluster"
	"github.com/tranche/tranche/internal/ingress"
)

const (
	roleEnv  = "BENCH_INGRESS_ROLE"
	host     = "bench.test"
	duration = "8s"
	conns    = "64"
	body     = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "backend":
		os.Exit(runBackend(os.Args[len(os.Args)-1]))
	case "proxy":
		os.Exit(runProxy())
	}
	os.Exit(m.Run())
}

func runBackend(addr string) int {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(body))
	})
	if err := http.ListenAndServe(addr, h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runProxy serves tranche's proxy on BENCH_HTTP and BENCH_HTTPS to BENCH_BACKENDS.
func runProxy() int {
	f := ingress.NewFake(
		&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "tranche",
			Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
			Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}},
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench"},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "echo",
							Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}},
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "echo"},
			Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}},
	)
	for i, a := range strings.Split(os.Getenv("BENCH_BACKENDS"), ",") {
		h, p, _ := net.SplitHostPort(a)
		port, _ := strconv.Atoi(p)
		f.Add(&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("echo-%d", i), Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(port))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{h}}},
		})
	}
	// `tranche ingress` runs with GOGC=50 (cmd/tranche tuneMemory); so does the proxy here.
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(50)
	}
	ctx, stop := signalContext()
	defer stop()
	cfg := ingress.ProxyConfig{Attempts: 3, MaxBodyBytes: 100 << 20}
	if file := os.Getenv("BENCH_ACCESS_LOG"); file != "" {
		// As `tranche ingress` runs by default: access log and metrics.
		lf, err := os.Create(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer lf.Close()
		lctx, stopLog := context.WithCancel(context.Background())
		var flushed <-chan struct{}
		cfg.AccessLog = true
		cfg.AccessLogger, flushed = ingress.NewAccessLogger(lctx, lf)
		defer func() { stopLog(); <-flushed }()
		cfg.Metrics = ingress.NewMetrics(prometheus.NewRegistry())
	}
	p := ingress.NewProxy(cfg)
	p.SetTable(ingress.Build(f))
	hl, err := net.Listen("tcp", os.Getenv("BENCH_HTTP"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sl, err := net.Listen("tcp", os.Getenv("BENCH_HTTPS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fb, err := ingress.FallbackCertificate(time.Now())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// nginx serves the same certificate, so both do the same handshake work.
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fb.Certificate[0]})
	keyDER, _ := x509.MarshalECPrivateKey(fb.PrivateKey.(*ecdsa.PrivateKey))
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	dir := os.Getenv("BENCH_DIR")
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return 1
	}
	// BENCH_INGRESS_CPUPROFILE=file writes the proxy's CPU profile, to see where it spends;
	// the proxy with the access log writes file.logged.
	if file := os.Getenv("BENCH_INGRESS_CPUPROFILE"); file != "" {
		if cfg.AccessLog {
			file += ".logged"
		}
		if pf, err := os.Create(file); err == nil && pprof.StartCPUProfile(pf) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	err = ingress.Serve(ctx, p, ingress.ServeConfig{HTTP: hl, HTTPS: sl, Fallback: fb, MaxHeaderBytes: 64 << 10,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, os.Interrupt)
		<-c
		cancel()
	}()
	return ctx, cancel
}

const nginxConf = `worker_processes %[6]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
user root;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream echo {
    %[2]s
    keepalive 256;
  }
  server {
    listen %[3]s;
    listen %[4]s ssl;
    server_name %[5]s;
    ssl_certificate %[1]s/tls.crt;
    ssl_certificate_key %[1]s/tls.key;
    location / {
      proxy_pass http://echo;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
    }
  }
  server {
    listen %[7]s;
    server_name %[5]s;
    access_log %[1]s/access.log combined buffer=64k flush=100ms;
    location / {
      proxy_pass http://echo;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
    }
  }
}
`

type figures struct {
	rps, p99ms float64
	requests   int64
	cpuPerReq  time.Duration
}

func BenchmarkIngressVsNginx(b *testing.B) {
	for _, tool := range []string{"wrk", "nginx"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat("/usr/sbin/" + tool); err != nil {
				b.Skipf("%s not installed: %v", tool, err)
			}
		}
	}
	dir := b.TempDir()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var backends []string
	for range 3 {
		addr := freeAddr(b)
		start(b, exec.Command(self, "backend", addr), "backend")
		backends = append(backends, addr)
	}
	for _, a := range backends {
		waitListening(b, a)
	}
	// Both proxies get as many workers as the machine has cores (nginx's "auto").
	workers := runtime.NumCPU()
	trHTTP, trHTTPS := freeAddr(b), freeAddr(b)
	proxy := exec.Command(self)
	proxy.Env = append(os.Environ(), roleEnv+"=proxy", "BENCH_HTTP="+trHTTP, "BENCH_HTTPS="+trHTTPS,
		"BENCH_BACKENDS="+strings.Join(backends, ","), "BENCH_DIR="+dir, fmt.Sprintf("GOMAXPROCS=%d", workers))
	start(b, proxy, "tranche proxy")
	logDir := filepath.Join(dir, "logged")
	if err := os.Mkdir(logDir, 0o700); err != nil {
		b.Fatal(err)
	}
	trLogged, trLoggedS := freeAddr(b), freeAddr(b)
	logged := exec.Command(self)
	logged.Env = append(os.Environ(), roleEnv+"=proxy", "BENCH_HTTP="+trLogged, "BENCH_HTTPS="+trLoggedS,
		"BENCH_BACKENDS="+strings.Join(backends, ","), "BENCH_DIR="+logDir, fmt.Sprintf("GOMAXPROCS=%d", workers),
		"BENCH_ACCESS_LOG="+filepath.Join(logDir, "access.log"))
	start(b, logged, "tranche proxy with access log")
	waitListening(b, trHTTP)
	waitListening(b, trHTTPS)
	waitListening(b, trLogged)

	ngHTTP, ngHTTPS, ngLogged := freeAddr(b), freeAddr(b), freeAddr(b)
	var servers strings.Builder
	for _, a := range backends {
		fmt.Fprintf(&servers, "server %s;\n    ", a)
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, dir, servers.String(), ngHTTP, ngHTTPS, host, workers, ngLogged)), 0o600); err != nil {
		b.Fatal(err)
	}
	nginx := exec.Command("/usr/sbin/nginx", "-c", conf, "-p", dir, "-g", "daemon off;")
	start(b, nginx, "nginx")
	waitListening(b, ngHTTP)
	waitListening(b, ngHTTPS)
	waitListening(b, ngLogged)
	ngWorkers := childPIDs(nginx.Process.Pid)

	results := map[string]figures{}
	for _, run := range []struct {
		name, url string
		pids      []int
	}{
		{"tranche http", "http://" + trHTTP + "/", []int{proxy.Process.Pid}},
		{"nginx http", "http://" + ngHTTP + "/", ngWorkers},
		{"tranche https", "https://" + trHTTPS + "/", []int{proxy.Process.Pid}},
		{"nginx https", "https://" + ngHTTPS + "/", ngWorkers},
		{"tranche http, logged", "http://" + trLogged + "/", []int{logged.Process.Pid}},
		{"nginx http, logged", "http://" + ngLogged + "/", ngWorkers},
	} {
		before := cpuTime(b, run.pids)
		f := runWrk(b, run.url)
		f.cpuPerReq = (cpuTime(b, run.pids) - before) / time.Duration(f.requests)
		results[run.name] = f
	}
	trRSS := rssMB(b, proxy.Process.Pid)
	ngRSS := rssMB(b, nginx.Process.Pid)
	for _, pid := range ngWorkers {
		ngRSS += rssMB(b, pid)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "wrk -t2 -c%s -d%s, 3 backends, keep-alive to them; %d workers each; load %s\n", conns, duration, workers, loadavg())
	fmt.Fprintln(tw, "\ttranche req/s\tnginx req/s\tratio (goal)\ttranche p99\tnginx p99\ttranche CPU/req\tnginx CPU/req\tCPU ratio")
	for _, proto := range []string{"http", "https", "http, logged"} {
		tr, ng := results["tranche "+proto], results["nginx "+proto]
		goal := "1.0"
		if proto == "https" {
			goal = "0.8"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f (>= %s)\t%.2f ms\t%.2f ms\t%.1f µs\t%.1f µs\t%.2f\n", proto, tr.rps, ng.rps, tr.rps/ng.rps, goal, tr.p99ms, ng.p99ms,
			us(tr.cpuPerReq), us(ng.cpuPerReq), float64(tr.cpuPerReq)/float64(ng.cpuPerReq))
	}
	fmt.Fprintf(tw, "memory (RSS after the runs)\t%.1f MB\t%.1f MB (master+workers)\t%.2f\t\t\t\t\t\n", trRSS, ngRSS, trRSS/ngRSS)
	tw.Flush()
	b.ReportMetric(results["tranche http"].rps/results["nginx http"].rps, "http-ratio")
	b.ReportMetric(results["tranche https"].rps/results["nginx https"].rps, "https-ratio")
	b.ReportMetric(results["tranche http, logged"].rps/results["nginx http, logged"].rps, "logged-ratio")
	b.ReportMetric(trRSS, "tranche-rss-MB")
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuTime is the user+system CPU time the processes pids have used so far.
func cpuTime(b *testing.B, pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		own, _, err := benchcluster.ProcessCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		total += own
	}
	return total
}

func runWrk(b *testing.B, url string) figures {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "wrk", "-t2", "-c"+conns, "-d"+duration, "--latency", "-H", "Host: "+host, url).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk %s: %v\n%s", url, err, out)
	}
	if m := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`).FindSubmatch(out); m != nil {
		b.Fatalf("wrk %s: %s error answers:\n%s", url, m[1], out)
	}
	rps := field(b, out, `Requests/sec:\s+([\d.]+)`)
	n := field(b, out, `(\d+) requests in`)
	p99 := latencyMS(b, out, `(?m)^\s+99%\s+([\d.]+)(us|ms|s)\s*$`)
	return figures{rps: rps, p99ms: p99, requests: int64(n)}
}

func field(b *testing.B, out []byte, re string) float64 {
	m := regexp.MustCompile(re).FindSubmatch(out)
	if m == nil {
		b.Fatalf("wrk output has no %s:\n%s", re, out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func latencyMS(b *testing.B, out []byte, re string) float64 {
	m := regexp.MustCompile(re).FindSubmatch(out)
	if m == nil {
		b.Fatalf("wrk output has no %s:\n%s", re, out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	switch string(m[2]) {
	case "us":
		return v / 1000
	case "s":
		return v * 1000
	}
	return v
}

// start runs cmd (a backend gets its role from the environment) and stops it when the
// benchmark ends.
func start(b *testing.B, cmd *exec.Cmd, what string) {
	if what == "backend" {
		cmd.Env = append(os.Environ(), roleEnv+"=backend", "GOMAXPROCS=1")
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", what, err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(b *testing.B, addr string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("nothing listens on %s after 10s", addr)
}

// rssMB is VmRSS of pid in MB.
func rssMB(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1000
		}
	}
	return 0
}

func childPIDs(pid int) []int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
