package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests of this file drive `kubectl logs`, `exec`, `attach`, `run -it`,
// `port-forward`, `cp` and `proxy` against the shared `tranche up` cluster.

// background is a kubectl left running (logs -f, port-forward, proxy, an interactive
// session in a pseudo-terminal); it is killed, with its process group, at cleanup.
type background struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (b *background) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

// output is everything the process printed so far.
func (b *background) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// startBackground starts argv[0] with argv[1:] in its own process group.
func startBackground(t *testing.T, env []string, argv ...string) *background {
	t.Helper()
	b := &background{done: make(chan struct{})}
	b.cmd = exec.Command(argv[0], argv[1:]...)
	b.cmd.Env = append(append(os.Environ(), "KUBECTL_KUBERC=false"), env...)
	b.cmd.Stdout, b.cmd.Stderr = b, b
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := b.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	b.in = in
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", argv, err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(b.kill)
	return b
}

// kill ends the process group and waits for the process.
func (b *background) kill() {
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.done
}

// waitFor waits until the output contains every string.
func (b *background) waitFor(t *testing.T, timeout time.Duration, want ...string) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("output containing %q", want), func() (bool, string) {
		out := b.output()
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false, tail(out, 2000)
			}
		}
		return true, ""
	})
}

// exitCode waits for the process to end and returns its exit code.
func (b *background) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(timeout):
		t.Fatalf("%v still running after %s; output:\n%s", b.cmd.Args, timeout, tail(b.output(), 2000))
	}
	var ee *exec.ExitError
	if errors.As(b.err, &ee) {
		return ee.ExitCode()
	}
	if b.err != nil {
		t.Fatalf("%v: %v", b.cmd.Args, b.err)
	}
	return 0
}

// inTerminal runs kubectl in a pseudo-terminal (script(1)), as a person would.
func inTerminal(t *testing.T, kubeconfig string, args ...string) *background {
	t.Helper()
	line := []string{shellQuote(kubectlBin), "--kubeconfig", shellQuote(kubeconfig)}
	for _, a := range args {
		line = append(line, shellQuote(a))
	}
	return startBackground(t, nil, "script", "-qfec", strings.Join(line, " "), "/dev/null")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// kubectlEnv runs kubectl with extra environment variables and returns stdout, stderr
// and the exit code.
func kubectlEnv(t *testing.T, s *server, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", s.kubeconfig}, args...)...)
	cmd.Env = append(append(os.Environ(), "KUBECTL_KUBERC=false"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), 0
}

// applyManifest applies a YAML document in ns.
func applyManifest(t *testing.T, s *server, ns, yaml string) {
	t.Helper()
	if out, errOut, err := s.kubectl(t, yaml, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
}

const webManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["netexec", "--http-port=8080"]
        ports: [{containerPort: 8080, name: http}]
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
`

// TestStreamSeedPractice is the seed's practice sequence at a terminal: `kubectl run
// diag --rm -it --restart=Never --image=busybox:1.37 -- sh`, then resolv.conf shows the
// cluster DNS, search domains and ndots:5, wget reaches a pod by its address, `exit`
// ends the session and the diag pod is gone.
func TestStreamSeedPractice(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	applyManifest(t, s, ns, strings.ReplaceAll(apiLikePod, "%s", "cible"))
	c.waitReady(t, ns, "cible")
	ip := s.must(t, "get", "pod", "cible", "-n", ns, "-o", "jsonpath={.status.podIP}")

	term := inTerminal(t, s.kubeconfig, "-n", ns, "run", "diag", "--rm", "-it", "--restart=Never", "--image=busybox:1.37", "--", "sh")
	term.waitFor(t, 60*time.Second, "If you don't see a command prompt")
	// The shell computes the marker, so seeing it proves the input reached it.
	fmt.Fprintf(term.in, "echo ready-$((40+2))\n")
	term.waitFor(t, 30*time.Second, "ready-42")
	fmt.Fprintf(term.in, "cat /etc/resolv.conf\n")
	term.waitFor(t, 10*time.Second, "nameserver 10.96.0.10", "search "+ns+".svc.cluster.local svc.cluster.local cluster.local", "options ndots:5")
	fmt.Fprintf(term.in, "wget -qO- http://%s:8080/hostname; echo\n", ip)
	term.waitFor(t, 10*time.Second, "\ncible")
	fmt.Fprintf(term.in, "exit\n")
	if code := term.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("kubectl run -it exited %d; output:\n%s", code, term.output())
	}
	if !strings.Contains(term.output(), `pod "diag" deleted`) {
		t.Fatalf("kubectl run --rm did not delete the pod; output:\n%s", term.output())
	}
	eventually(t, 30*time.Second, "diag pod gone", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "pod", "diag", "-n", ns)
		return err != nil && strings.Contains(errOut, "NotFound"), out + errOut
	})
}

const tickerManifest = `apiVersion: v1
kind: Pod
metadata: {name: ticker, labels: {app: ticker}}
spec:
  restartPolicy: Never
  containers:
  - name: ticker
    image: busybox:1.37
    command: ["sh", "-c", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done"]
  - name: done
    image: busybox:1.37
    command: ["true"]
---
apiVersion: v1
kind: Pod
metadata: {name: twice}
spec:
  containers:
  - name: twice
    image: busybox:1.37
    command: ["sh", "-c", "if [ -e /tmp/ran ]; then echo second-instance; exec sleep 3600; fi; touch /tmp/ran; echo first-instance; exit 1"]
    volumeMounts: [{name: scratch, mountPath: /tmp}]
  volumes: [{name: scratch, emptyDir: {}}]
`

var tickRE = regexp.MustCompile(`tick-(\d+)`)

// TestStreamExecAndLogs: exec's exit codes, stdin, stdout and stderr over WebSocket
// and SPDY; Kubernetes' 400s for a container that does not run and one that does not
// exist; logs with tail, timestamps, limit, since, selectors, follow and previous.
func TestStreamExecAndLogs(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	applyManifest(t, s, ns, tickerManifest)
	eventually(t, 60*time.Second, "ticker running and done terminated", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "ticker", "-n", ns, "-o",
			`jsonpath={.status.containerStatuses[?(@.name=="ticker")].state.running.startedAt} {.status.containerStatuses[?(@.name=="done")].state.terminated.exitCode}`)
		f := strings.Fields(out)
		return len(f) == 2 && f[1] == "0", out
	})

	t.Run("exit code", func(t *testing.T) {
		out, errOut, code := kubectlEnv(t, s, nil, "", "exec", "ticker", "-n", ns, "-c", "ticker", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if code != 3 || out != "out\n" || !strings.Contains(errOut, "err\n") {
			t.Fatalf("exec over WebSocket: exit %d, stdout %q, stderr %q; want 3, out, err", code, out, errOut)
		}
		out, errOut, code = kubectlEnv(t, s, []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}, "", "exec", "ticker", "-n", ns, "-c", "ticker", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
		if code != 7 || out != "out\n" || !strings.Contains(errOut, "err\n") {
			t.Fatalf("exec over SPDY: exit %d, stdout %q, stderr %q; want 7, out, err", code, out, errOut)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		for _, env := range [][]string{nil, {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}} {
			out, errOut, code := kubectlEnv(t, s, env, "bonjour\n", "exec", "-i", "ticker", "-n", ns, "-c", "ticker", "--", "tr", "a-z", "A-Z")
			if code != 0 || out != "BONJOUR\n" {
				t.Fatalf("exec -i (%v): exit %d, stdout %q, stderr %q", env, code, out, errOut)
			}
		}
	})
	t.Run("bad container", func(t *testing.T) {
		_, errOut, code := kubectlEnv(t, s, nil, "", "exec", "ticker", "-n", ns, "-c", "done", "--", "true")
		if code == 0 || !strings.Contains(errOut, `container not found ("done")`) {
			t.Fatalf("exec into a terminated container: exit %d, stderr %q", code, errOut)
		}
		_, errOut, code = kubectlEnv(t, s, nil, "", "get", "--raw", "/api/v1/namespaces/"+ns+"/pods/ticker/log?container=nope")
		want := "Error from server (BadRequest): container nope is not valid for pod ticker, choose one of: [ticker done]"
		if code == 0 || !strings.Contains(errOut, want) {
			t.Fatalf("log of an unknown container: exit %d, stderr %q; want %q", code, errOut, want)
		}
	})
	t.Run("logs", func(t *testing.T) {
		out := s.must(t, "logs", "ticker", "-n", ns, "-c", "ticker", "--tail=2")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !tickRE.MatchString(lines[0]) {
			t.Fatalf("--tail=2: %q", out)
		}
		out = s.must(t, "logs", "ticker", "-n", ns, "-c", "ticker", "--tail=1", "--timestamps")
		ts, rest, _ := strings.Cut(strings.TrimSpace(out), " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !tickRE.MatchString(rest) {
			t.Fatalf("--timestamps: %q", out)
		}
		if out := s.must(t, "logs", "ticker", "-n", ns, "-c", "ticker", "--limit-bytes=6"); out != "tick-0" {
			t.Fatalf("--limit-bytes=6: %q", out)
		}
		if out := s.must(t, "logs", "ticker", "-n", ns, "-c", "ticker", "--since=1h"); !strings.HasPrefix(out, "tick-0\n") {
			t.Fatalf("--since=1h: %q", tail(out, 200))
		}
		if out := s.must(t, "logs", "-l", "app=ticker", "-n", ns, "-c", "ticker", "--tail=1"); !tickRE.MatchString(out) {
			t.Fatalf("logs -l: %q", out)
		}
	})
	t.Run("follow", func(t *testing.T) {
		f := startBackground(t, nil, kubectlBin, "--kubeconfig", s.kubeconfig, "logs", "-f", "ticker", "-n", ns, "-c", "ticker", "--tail=1")
		first := -1
		eventually(t, 20*time.Second, "logs -f showing lines written after it started", func() (bool, string) {
			out := f.output()
			m := tickRE.FindAllStringSubmatch(out, -1)
			if len(m) == 0 {
				return false, out
			}
			if first < 0 {
				first, _ = strconv.Atoi(m[0][1])
			}
			last, _ := strconv.Atoi(m[len(m)-1][1])
			return last >= first+5, out
		})
	})
	t.Run("previous", func(t *testing.T) {
		eventually(t, 60*time.Second, "twice restarted once", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "pod", "twice", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].state.running.startedAt}")
			f := strings.Fields(out)
			return len(f) == 2 && f[0] == "1", out
		})
		if out := s.must(t, "logs", "twice", "-n", ns); out != "second-instance\n" {
			t.Fatalf("logs after a restart: %q", out)
		}
		if out := s.must(t, "logs", "twice", "-n", ns, "--previous"); out != "first-instance\n" {
			t.Fatalf("logs --previous: %q", out)
		}
	})
}

// TestStreamPortForwardCopyProxy: port-forward to a Service and to a pod (several
// ports, concurrent connections, WebSocket and SPDY), kubectl cp both ways, logs of a
// deployment, and kubectl proxy reaching a Service and a pod.
func TestStreamPortForwardCopyProxy(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	applyManifest(t, s, ns, webManifest+`---
apiVersion: v1
kind: Pod
metadata: {name: box}
spec:
  containers:
  - name: box
    image: busybox:1.37
    command: ["sleep", "3600"]
    volumeMounts: [{name: scratch, mountPath: /tmp}]
  volumes: [{name: scratch, emptyDir: {}}]
`)
	s.must(t, "rollout", "status", "deployment/web", "-n", ns, "--timeout=60s")
	web := strings.TrimPrefix(s.must(t, "get", "pods", "-n", ns, "-l", "app=web", "-o", "name"), "pod/")
	web = strings.TrimSpace(web)
	c.waitReady(t, ns, "box")

	get := func(url string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		return string(b), err
	}
	port := func() string {
		addr, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := strings.Cut(addr, ":")
		return p
	}

	t.Run("service", func(t *testing.T) {
		local := port()
		pf := startBackground(t, nil, kubectlBin, "--kubeconfig", s.kubeconfig, "port-forward", "-n", ns, "service/web", local+":80")
		pf.waitFor(t, 30*time.Second, "Forwarding from 127.0.0.1:"+local)
		if out, err := get("http://127.0.0.1:" + local + "/hostname"); err != nil || out != web {
			t.Fatalf("through port-forward service/web: %q, %v; want %q", out, err, web)
		}
	})
	t.Run("pod ports concurrent spdy", func(t *testing.T) {
		p1, p2 := port(), port()
		pf := startBackground(t, []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}, kubectlBin, "--kubeconfig", s.kubeconfig,
			"port-forward", "-n", ns, "pod/"+web, p1+":8080", p2+":8080")
		pf.waitFor(t, 30*time.Second, "Forwarding from 127.0.0.1:"+p1, "Forwarding from 127.0.0.1:"+p2)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Go(func() {
				p := []string{p1, p2}[i%2]
				msg := fmt.Sprintf("message-%d", i)
				out, err := get("http://127.0.0.1:" + p + "/echo?msg=" + msg)
				if err != nil || out != msg {
					errs <- fmt.Errorf("connection %d on port %s: %q, %v", i, p, out, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	t.Run("cp", func(t *testing.T) {
		dir := t.TempDir()
		payload := make([]byte, 64<<10)
		_, _ = rand.Read(payload)
		src := filepath.Join(dir, "payload.bin")
		if err := os.WriteFile(src, payload, 0o644); err != nil {
			t.Fatal(err)
		}
		s.must(t, "cp", src, ns+"/box:/tmp/payload.bin")
		back := filepath.Join(dir, "back.bin")
		s.must(t, "cp", ns+"/box:/tmp/payload.bin", back)
		got, err := os.ReadFile(back)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("kubectl cp round trip: %d bytes back (%v), want the %d bytes sent", len(got), err, len(payload))
		}
	})
	t.Run("logs deployment", func(t *testing.T) {
		if out := s.must(t, "logs", "deployment/web", "-n", ns); !strings.Contains(out, "Started HTTP server on port 8080") {
			t.Fatalf("logs deployment/web: %q", out)
		}
	})
	t.Run("proxy", func(t *testing.T) {
		local := port()
		px := startBackground(t, nil, kubectlBin, "--kubeconfig", s.kubeconfig, "proxy", "--port="+local)
		px.waitFor(t, 30*time.Second, "Starting to serve on 127.0.0.1:"+local)
		base := "http://127.0.0.1:" + local + "/api/v1/namespaces/" + ns
		if out, err := get(base + "/services/web:http/proxy/hostname"); err != nil || out != web {
			t.Fatalf("services/web:http/proxy: %q, %v; want %q", out, err, web)
		}
		if out, err := get(base + "/pods/" + web + ":8080/proxy/echo?msg=direct"); err != nil || out != "direct" {
			t.Fatalf("pods/%s:8080/proxy: %q, %v", web, out, err)
		}
	})
}

// TestStreamDroppedClientLeaksNothing: killing kubectl in the middle of an exec (with
// and without a terminal) ends the command in the container and leaves the node agent
// with no more file descriptors or threads than before.
func TestStreamDroppedClientLeaksNothing(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	applyManifest(t, s, ns, `apiVersion: v1
kind: Pod
metadata: {name: idle}
spec:
  containers:
  - name: idle
    image: busybox:1.37
    command: ["sleep", "3600"]
`)
	c.waitReady(t, ns, "idle")
	node := s.must(t, "get", "pod", "idle", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	pidData, err := os.ReadFile(filepath.Join(c.dataDir, "nodes", node, "agent.pid"))
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := strconv.Atoi(strings.Fields(string(pidData))[0])
	// One exec first, so that what a first exec sets up for good (connections to
	// the API server, the runtime's threads) is in the baseline.
	s.must(t, "exec", "idle", "-n", ns, "--", "true")
	fds0, threads0 := countDir(t, fmt.Sprintf("/proc/%d/fd", agent)), countDir(t, fmt.Sprintf("/proc/%d/task", agent))

	const sessions = 6
	for i := range sessions {
		marker := fmt.Sprintf("%d", 86000+i)
		var k *background
		if i%2 == 0 {
			k = startBackground(t, nil, kubectlBin, "--kubeconfig", s.kubeconfig, "exec", "idle", "-n", ns, "--", "sleep", marker)
		} else {
			k = inTerminal(t, s.kubeconfig, "exec", "-it", "idle", "-n", ns, "--", "sleep", marker)
		}
		eventually(t, 20*time.Second, "sleep "+marker+" running in the container", func() (bool, string) {
			return len(processesWith("sleep\x00"+marker+"\x00")) > 0, ""
		})
		k.kill()
		eventually(t, 20*time.Second, "sleep "+marker+" ended with its client", func() (bool, string) {
			left := processesWith("sleep\x00" + marker + "\x00")
			return len(left) == 0, fmt.Sprint(left)
		})
	}
	// A leak of one descriptor or thread per session would show as `sessions` more.
	eventually(t, 20*time.Second, "agent back to its descriptors and threads", func() (bool, string) {
		fds, threads := countDir(t, fmt.Sprintf("/proc/%d/fd", agent)), countDir(t, fmt.Sprintf("/proc/%d/task", agent))
		return fds <= fds0+2 && threads <= threads0+2, fmt.Sprintf("fds %d (before %d), threads %d (before %d)", fds, fds0, threads, threads0)
	})
}

func countDir(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// processesWith lists the processes whose NUL-separated command line ends with suffix.
func processesWith(suffix string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.HasSuffix(cmdline, []byte(suffix)) && !bytes.Contains(cmdline, []byte("kubectl")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestStreamAuthorization: exec needs create on pods/exec; read access to pods (even
// get on pods/exec, which a WebSocket GET asks for) is not enough.
func TestStreamAuthorization(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	applyManifest(t, s, ns, `apiVersion: v1
kind: Pod
metadata: {name: guarded}
spec:
  containers:
  - name: guarded
    image: busybox:1.37
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: peek}
rules:
- apiGroups: [""]
  resources: ["pods", "pods/exec", "pods/log"]
  verbs: ["get", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot-peek}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: peek}
subjects: [{kind: ServiceAccount, name: robot}]
`)
	c.waitReady(t, ns, "guarded")
	as := "--as=system:serviceaccount:" + ns + ":robot"
	eventually(t, 20*time.Second, "robot can read logs", func() (bool, string) {
		_, errOut, code := kubectlEnv(t, s, nil, "", "logs", "guarded", "-n", ns, as)
		return code == 0, errOut
	})
	for _, env := range [][]string{nil, {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}} {
		_, errOut, code := kubectlEnv(t, s, env, "", "exec", "guarded", "-n", ns, as, "--", "true")
		if code == 0 || !strings.Contains(errOut, `cannot create resource "pods/exec"`) {
			t.Fatalf("exec with get-only rights (%v): exit %d, stderr %q", env, code, errOut)
		}
	}
	s.must(t, "create", "rolebinding", "robot-edit", "-n", ns, "--clusterrole=edit", "--serviceaccount="+ns+":robot")
	eventually(t, 20*time.Second, "robot can exec once bound to edit", func() (bool, string) {
		out, errOut, code := kubectlEnv(t, s, nil, "", "exec", "guarded", "-n", ns, as, "--", "echo", "allowed")
		return code == 0 && out == "allowed\n", errOut
	})
}

// TestStreamAttach: kubectl attach -i feeds a running container's stdin (stdinOnce
// closes it after the session) and shows what it writes, over WebSocket and SPDY.
func TestStreamAttach(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	pod := `apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  containers:
  - name: echo
    image: busybox:1.37
    stdin: true
    stdinOnce: true
    command: ["sh", "-c", "while read l; do echo got-$l; done; echo stdin-closed"]
`
	for i, env := range [][]string{nil, {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}} {
		name := fmt.Sprintf("reader-%d", i)
		applyManifest(t, s, ns, fmt.Sprintf(pod, name))
		c.waitReady(t, ns, name)
		out, errOut, code := kubectlEnv(t, s, env, "bonjour\nsalut\n", "attach", "-i", name, "-n", ns)
		if code != 0 || !strings.Contains(out, "got-bonjour\ngot-salut\n") {
			t.Fatalf("kubectl attach -i (%v): exit %d, stdout %q, stderr %q", env, code, out, errOut)
		}
		eventually(t, 30*time.Second, name+" succeeded once its stdin closed", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}")
			return out == "Succeeded", out
		})
	}
}
