// Package stream benchmarks talking to pods (`make bench-stream`): port-forward
// throughput through the real kubectl against reading the same data from the node's
// namespace directly, and exec round trips against running the same nsenter the agent
// runs. Figures are printed beside their reference as ratios; nothing here fails on a
// slow figure. It needs root, kubectl on PATH and TRANCHE_BIN (the Makefile sets it).
package stream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/tranche/tranche/bench/benchcluster"
	"github.com/tranche/tranche/internal/netns"
)

const (
	// blobMiB is the size of the file the pod serves.
	blobMiB = 64
	// transfers is how many times each path reads it (the best is kept).
	transfers = 3
	// execRuns and kubectlRuns size the round-trip samples.
	execRuns    = 40
	kubectlRuns = 10
	benchNS     = "bench"
)

const blobPod = `apiVersion: v1
kind: Pod
metadata: {name: blob, namespace: bench}
spec:
  containers:
  - name: blob
    image: busybox:1.37
    command: ["sh", "-c", "dd if=/dev/urandom of=/tmp/blob bs=1M count=%d 2>/dev/null && exec busybox httpd -f -p 8080 -h /tmp"]
    volumeMounts: [{name: scratch, mountPath: /tmp}]
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
  volumes: [{name: scratch, emptyDir: {}}]
`

// init keeps the main thread for the main goroutine: the throw-away threads netns.Dial
// leaves in the node's namespace are then never the main thread, whose namespace is the
// one `tranche down` sees for this process (it stops every process inside the
// cluster's namespaces).
func init() { goruntime.LockOSThread() }

// cluster is the one-node `tranche up` the benchmark runs on.
type cluster struct {
	dir, kubeconfig, nodeNS string
	// apiserver and agent are the PIDs of `tranche up` (the API server runs in it) and
	// of the node's agent.
	apiserver, agent int
	cfg              *rest.Config
	client           kubernetes.Interface
}

func startCluster(b *testing.B) *cluster {
	b.Helper()
	if os.Getuid() != 0 {
		b.Skip("needs root (a tranche up cluster)")
	}
	bin := os.Getenv("TRANCHE_BIN")
	if bin == "" {
		b.Skip("TRANCHE_BIN is not set; run `make bench-stream`")
	}
	dir, err := os.MkdirTemp("", "trbs-")
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	prefix := fmt.Sprintf("tb%d-", os.Getpid()%1000)
	b.Cleanup(func() {
		_ = exec.Command(bin, "down", "--data-dir", dir, "--purge").Run()
		os.RemoveAll(dir)
	})
	if out, err := exec.Command(bin, "up", "--detach", "--nodes", "1", "--data-dir", dir, "--listen", addr, "--netns-prefix", prefix).CombinedOutput(); err != nil {
		b.Fatalf("tranche up: %v\n%s", err, out)
	}
	c := &cluster{dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	if c.cfg, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		b.Fatal(err)
	}
	c.client = kubernetes.NewForConfigOrDie(c.cfg)
	c.kubectl(b, "", "create", "namespace", benchNS)
	c.kubectl(b, fmt.Sprintf(blobPod, blobMiB), "apply", "-f", "-")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pod, err := c.client.CoreV1().Pods(benchNS).Get(context.Background(), "blob", metav1.GetOptions{})
		if err == nil && podReady(pod) {
			c.nodeNS = prefix + pod.Spec.NodeName
			c.apiserver = findProcess(b, func(args []string) bool { return args[1] == "up" && slices.Contains(args, dir) })
			c.agent = findProcess(b, func(args []string) bool {
				return args[1] == "agent" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, dir+"/nodes/") })
			})
			return c
		}
		if time.Now().After(deadline) {
			b.Fatalf("pod blob not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func (c *cluster) kubectl(b *testing.B, stdin string, args ...string) string {
	b.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECTL_KUBERC=false")
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// readBlob reads an HTTP/1.0 response from conn to the end and returns the body's rate.
func readBlob(conn net.Conn) (float64, error) {
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "GET /blob HTTP/1.0\r\n\r\n"); err != nil {
		return 0, err
	}
	br := bufio.NewReaderSize(conn, 256<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, err
	}
	if n != blobMiB<<20 {
		return 0, fmt.Errorf("read %d bytes, want %d", n, blobMiB<<20)
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds(), nil
}

// best runs read transfers times and keeps the best rate.
func best(b *testing.B, what string, dial func() (net.Conn, error)) float64 {
	b.Helper()
	var top float64
	for range transfers {
		top = max(top, readOnce(b, what, dial))
	}
	return top
}

// readOnce reads the blob once and returns the rate.
func readOnce(b *testing.B, what string, dial func() (net.Conn, error)) float64 {
	b.Helper()
	conn, err := dial()
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	r, err := readBlob(conn)
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	return r
}

// findProcess returns the PID of the one process whose command line matches.
func findProcess(b *testing.B, match func(args []string) bool) int {
	b.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if args := strings.Split(string(data), "\x00"); err == nil && len(args) > 1 && match(args) {
			return pid
		}
	}
	b.Fatal("a process of the cluster was not found")
	return 0
}

// processCPU is the CPU time (user and system) process pid has used so far.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	own, _, err := benchcluster.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return own
}

// cpuPer returns what each of pids spent in CPU time per run of f, over runs runs.
func cpuPer(b *testing.B, pids []int, runs int, f func()) []time.Duration {
	b.Helper()
	before := make([]time.Duration, len(pids))
	for i, p := range pids {
		before[i] = processCPU(b, p)
	}
	for range runs {
		f()
	}
	out := make([]time.Duration, len(pids))
	for i, p := range pids {
		out[i] = (processCPU(b, p) - before[i]) / time.Duration(runs)
	}
	return out
}

// tlsHopCPU is the CPU time of carrying the blob once through TLS over loopback (the
// least of transfers runs is kept), both
// ends in this process, in the 256 KiB writes the agent makes: what one TLS leg of
// port-forward's path costs at the least, without SPDY, WebSocket or another process
// to wake.
func tlsHopCPU(b *testing.B) time.Duration {
	b.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		tc := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
		defer tc.Close()
		chunk := make([]byte, 256<<10)
		for range (blobMiB << 20) / len(chunk) {
			if _, err := tc.Write(chunk); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a throw-away certificate.
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Handshake(); err != nil {
		b.Fatal(err)
	}
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	n, err := io.CopyBuffer(io.Discard, conn, make([]byte, 256<<10))
	if err == nil && n != blobMiB<<20 {
		err = fmt.Errorf("read %d bytes, want %d", n, blobMiB<<20)
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := <-sent; err != nil {
		b.Fatal(err)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := func(r syscall.Rusage) time.Duration { return time.Duration(r.Utime.Nano() + r.Stime.Nano()) }
	return cpu(after) - cpu(before)
}

// portForward starts kubectl port-forward and returns the local address and
// kubectl's PID.
func (c *cluster) portForward(b *testing.B, env ...string) (string, int) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("kubectl", "--kubeconfig", c.kubeconfig, "port-forward", "-n", benchNS, "pod/blob", port+":8080")
	cmd.Env = append(append(os.Environ(), "KUBECTL_KUBERC=false"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return addr, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			b.Fatalf("kubectl port-forward did not listen on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// p50 runs f n times and returns the median duration.
func p50(b *testing.B, what string, n int, f func() error) time.Duration {
	b.Helper()
	d := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// containerPID finds the pod's httpd, the process exec enters.
func containerPID(b *testing.B) int {
	b.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.HasPrefix(data, []byte("busybox\x00httpd\x00-f\x00-p\x008080\x00")) {
			pid, _ := strconv.Atoi(e.Name())
			return pid
		}
	}
	b.Fatal("the pod's httpd process was not found")
	return 0
}

func BenchmarkStream(b *testing.B) {
	c := startCluster(b)
	pod, err := c.client.CoreV1().Pods(benchNS).Get(context.Background(), "blob", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	direct := best(b, "direct read", func() (net.Conn, error) {
		return netns.Dial(c.nodeNS, "tcp", net.JoinHostPort(pod.Status.PodIP, "8080"), 5*time.Second)
	})
	wsAddr, wsKubectl := c.portForward(b)
	var ws float64
	wsCPU := cpuPer(b, []int{c.apiserver, c.agent, wsKubectl}, transfers, func() {
		ws = max(ws, readOnce(b, "port-forward (WebSocket)", func() (net.Conn, error) { return net.Dial("tcp", wsAddr) }))
	})
	spdyAddr, spdyKubectl := c.portForward(b, "KUBECTL_PORT_FORWARD_WEBSOCKETS=false")
	var spdy float64
	spdyCPU := cpuPer(b, []int{c.apiserver, c.agent, spdyKubectl}, transfers, func() {
		spdy = max(spdy, readOnce(b, "port-forward (SPDY)", func() (net.Conn, error) { return net.Dial("tcp", spdyAddr) }))
	})
	hop := tlsHopCPU(b)
	for range transfers - 1 {
		hop = min(hop, tlsHopCPU(b))
	}

	u := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(benchNS).Name("blob").SubResource("exec").
		Param("command", "true").Param("stdout", "true").Param("stderr", "true").URL()
	exWS, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", u.String())
	if err != nil {
		b.Fatal(err)
	}
	exSPDY, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", u)
	if err != nil {
		b.Fatal(err)
	}
	run := func(ex remotecommand.Executor) func() error {
		return func() error {
			return ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
		}
	}
	execWS := p50(b, "exec over WebSocket", execRuns, run(exWS))
	execSPDY := p50(b, "exec over SPDY", execRuns, run(exSPDY))
	pid := strconv.Itoa(containerPID(b))
	nsenter := p50(b, "nsenter", execRuns, func() error {
		return exec.Command("nsenter", "-t", pid, "-m", "-u", "-i", "-n", "-p", "--", "true").Run()
	})
	kubectlExec := p50(b, "kubectl exec", kubectlRuns, func() error {
		return exec.Command("kubectl", "--kubeconfig", c.kubeconfig, "exec", "-n", benchNS, "blob", "--", "true").Run()
	})
	kubectlGet := p50(b, "kubectl get", kubectlRuns, func() error {
		return exec.Command("kubectl", "--kubeconfig", c.kubeconfig, "get", "pod", "-n", benchNS, "blob").Run()
	})

	b.ReportMetric(ws, "pf-MB/s")
	b.ReportMetric(float64(execWS)/float64(time.Millisecond), "exec-p50-ms")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "\nmetric\tours\treference\tratio\tgoal")
	fmt.Fprintf(tw, "port-forward, kubectl (WebSocket), %d MiB\t%.0f MB/s\tdirect from the node namespace %.0f MB/s\t%.2f\t>= 0.5\n", blobMiB, ws, direct, ws/direct)
	fmt.Fprintf(tw, "port-forward, kubectl (SPDY), %d MiB\t%.0f MB/s\tdirect from the node namespace %.0f MB/s\t%.2f\t>= 0.5\n", blobMiB, spdy, direct, spdy/direct)
	for _, row := range []struct {
		what string
		cpu  []time.Duration
	}{{"WebSocket", wsCPU}, {"SPDY", spdyCPU}} {
		sum := row.cpu[0] + row.cpu[1] + row.cpu[2]
		fmt.Fprintf(tw, "port-forward CPU per %d MiB (%s)\tAPI server %s + agent %s + kubectl %s = %s\ttwo bare TLS legs %s\t%.1f\t-\n",
			blobMiB, row.what, msMin(row.cpu[0]), msMin(row.cpu[1]), msMin(row.cpu[2]), msMin(sum), msMin(2*hop), float64(sum)/float64(2*hop))
	}
	fmt.Fprintf(tw, "exec true p50, client-go WebSocket\t%s\tnsenter alone %s\t%.1f\t-\n", msStr(execWS), msStr(nsenter), float64(execWS)/float64(nsenter))
	fmt.Fprintf(tw, "exec true p50, client-go SPDY\t%s\tnsenter alone %s\t%.1f\t-\n", msStr(execSPDY), msStr(nsenter), float64(execSPDY)/float64(nsenter))
	fmt.Fprintf(tw, "kubectl exec true p50\t%s\tkubectl get pod %s\t%.1f\t-\n", msStr(kubectlExec), msStr(kubectlGet), float64(kubectlExec)/float64(kubectlGet))
	tw.Flush()
	fmt.Printf("  best of %d transfers each; CPU times from /proc over the same transfers; two bare TLS legs: 2 x %d MiB through\n"+
		"  TLS over loopback in 256 KiB writes, both ends in the benchmark's process, least of %d; exec over %d runs, kubectl over %d;\n"+
		"  one node, 2 cores shared by kubectl, API server, agent and pod\n\n", transfers, blobMiB, transfers, execRuns, kubectlRuns)
}

// msMin prints whole milliseconds (the CPU times' unit is 10 ms).
func msMin(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func msStr(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
