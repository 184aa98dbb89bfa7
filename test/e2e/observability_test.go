package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// bearerGet fetches path from s with a bearer token and returns the HTTP code and body.
func bearerGet(t *testing.T, s *server, token, path string) (string, string) {
	t.Helper()
	out, err := exec.Command("curl", "-sk", "-H", "Authorization: Bearer "+token, "-w", "\n%{http_code}",
		"https://"+s.listen+path).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", path, err)
	}
	i := strings.LastIndex(string(out), "\n")
	return string(out[i+1:]), string(out[:i])
}

// TestAPIServerObservability: /metrics serves kube-apiserver's request metrics and the
// controllers' work queues to cluster-admin and to system:monitoring, 403 to a service
// account without it; /debug/pprof/ is cluster-admin's only; /readyz?verbose lists its
// checks as kube-apiserver does.
func TestAPIServerObservability(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	s.must(t, "get", "namespace", ns)

	metrics := s.must(t, "get", "--raw", "/metrics")
	for _, want := range []string{
		"# TYPE apiserver_request_total counter",
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",scope="resource",subresource="",verb="GET",version="v1"}`,
		"# TYPE apiserver_request_duration_seconds histogram",
		`apiserver_storage_objects{resource="namespaces"}`,
		`etcd_request_duration_seconds_bucket{group="",operation="get",resource="namespaces",le="0.005"}`,
		"# TYPE workqueue_depth gauge",
		`workqueue_adds_total{name="`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}

	readyz := s.must(t, "get", "--raw", "/readyz?verbose")
	for _, want := range []string{"[+]ping ok\n", "[+]etcd ok\n", "[+]shutdown ok\n", "readyz check passed"} {
		if !strings.Contains(readyz, want) {
			t.Errorf("/readyz?verbose has no %q:\n%s", want, readyz)
		}
	}
	if out := s.must(t, "get", "--raw", "/readyz/etcd"); out != "ok" {
		t.Errorf("/readyz/etcd = %q, want ok", out)
	}
	if out := s.must(t, "get", "--raw", "/debug/pprof/"); !strings.Contains(out, "goroutine") {
		t.Errorf("admin /debug/pprof/ has no goroutine profile:\n%s", tail(out, 500))
	}

	s.must(t, "create", "serviceaccount", "scraper", "-n", ns)
	token := strings.TrimSpace(s.must(t, "create", "token", "scraper", "-n", ns))
	user := "system:serviceaccount:" + ns + ":scraper"
	for _, path := range []string{"/metrics", "/debug/pprof/heap"} {
		code, body := bearerGet(t, s, token, path)
		want := fmt.Sprintf(`forbidden: User \"%s\" cannot get path \"%s\"`, user, path)
		if code != "403" || !strings.Contains(body, want) {
			t.Errorf("%s without a role: HTTP %s %s\nwant 403 with %s", path, code, body, want)
		}
	}

	binding := "e2e-scraper-monitoring-" + ns
	s.must(t, "create", "clusterrolebinding", binding, "--clusterrole=system:monitoring", "--serviceaccount="+ns+":scraper")
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "clusterrolebinding", binding) })
	eventually(t, 10*time.Second, "system:monitoring reads /metrics", func() (bool, string) {
		code, body := bearerGet(t, s, token, "/metrics")
		return code == "200" && strings.Contains(body, "apiserver_request_total"), code + " " + tail(body, 200)
	})
	if code, body := bearerGet(t, s, token, "/debug/pprof/heap"); code != "403" {
		t.Errorf("system:monitoring /debug/pprof/heap: HTTP %s %s, want 403", code, tail(body, 200))
	}
}

// TestKubeProxyMetricsNotReachableFromPods: the node proxy serves /metrics on the node's
// loopback only (kube-proxy's --metrics-bind-address 127.0.0.1:10249): a pod cannot
// reach NODE-IP:10249 while NODE-IP:10256/healthz answers it, and the node itself reads
// its metrics on 127.0.0.1:10249.
func TestKubeProxyMetricsNotReachableFromPods(t *testing.T) {
	c := up(t)
	ns := c.srv.namespace(t)
	c.apply(t, ns, fmt.Sprintf(apiLikePod, "probe"))
	c.waitReady(t, ns, "probe")
	node := c.srv.must(t, "get", "pod", "probe", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	nodeIP := c.srv.must(t, "get", "node", node, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
	podNS := c.podNS(t, ns, "probe")

	if body, err := fetch(podNS, "http://"+nodeIP+":10256/healthz"); err != nil {
		t.Fatalf("a pod must reach its node's proxy healthz (the path works): %v %q", err, body)
	}
	if body, err := fetch(podNS, "http://"+nodeIP+":10249/metrics"); err == nil {
		t.Errorf("a pod read its node's proxy metrics at %s:10249:\n%s", nodeIP, tail(body, 300))
	}
	body, err := fetch(c.prefix+node, "http://127.0.0.1:10249/metrics")
	if err != nil || !strings.Contains(body, "kubeproxy_") {
		t.Errorf("the node's loopback must serve the proxy metrics: %v %q", err, tail(body, 300))
	}
}
