package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestJoinWithToken: `tranche token create` makes a kubeadm bootstrap token whose
// signature appears in kube-public/cluster-info (readable anonymously); an agent started
// with --server, --token and --ca-cert-hash in a node's namespace gets its certificate
// through an auto-approved CSR and runs a pod, and its identity writes only its own
// Node and Lease. Joins with a wrong, unknown, expired or non-signing token, or a CA hash that
// does not match, fail saying which.
func TestJoinWithToken(t *testing.T) {
	c := upOwn(t, "jn", 1)
	s := c.srv
	out, err := exec.Command(trancheBin, "token", "create", "--kubeconfig", s.kubeconfig, "--print-join-command", "--description", "e2e join").CombinedOutput()
	if err != nil {
		t.Fatalf("tranche token create: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`^tranche agent --server (https://\S+) --token (([a-z0-9]{6})\.[a-z0-9]{16}) --ca-cert-hash (sha256:[0-9a-f]{64})\n$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("tranche token create --print-join-command printed %q", out)
	}
	server, token, id, hash := m[1], m[2], m[3], m[4]
	list, err := exec.Command(trancheBin, "token", "list", "--kubeconfig", s.kubeconfig).CombinedOutput()
	if err != nil || !regexp.MustCompile(id+`\.<redacted>\s+2[34]h\s+\S+\s+authentication,signing\s+e2e join\s+system:bootstrappers:kubeadm:default-node-token`).Match(list) {
		t.Fatalf("tranche token list: %v\n%s", err, list)
	}
	if got := s.must(t, "get", "secret", "-n", "kube-system", "bootstrap-token-"+id, "-o", "jsonpath={.type}"); got != "bootstrap.kubernetes.io/token" {
		t.Fatalf("token secret type %q", got)
	}
	// A token given on the command line, deleted again by its id.
	if out, err := exec.Command(trancheBin, "token", "create", "--kubeconfig", s.kubeconfig, "--ttl", "0", "del123.0123456789abcdef").CombinedOutput(); err != nil ||
		string(out) != "del123.0123456789abcdef\n" {
		t.Fatalf("tranche token create del123: %v\n%s", err, out)
	}
	if got := s.must(t, "get", "secret", "-n", "kube-system", "bootstrap-token-del123", "-o", "jsonpath={.data.expiration}"); got != "" {
		t.Errorf("--ttl 0 token expires: %q", got)
	}
	if out, err := exec.Command(trancheBin, "token", "delete", "--kubeconfig", s.kubeconfig, "del123").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), `bootstrap token "del123" deleted`) {
		t.Fatalf("tranche token delete: %v\n%s", err, out)
	}
	if out, err := exec.Command(trancheBin, "token", "delete", "--kubeconfig", s.kubeconfig, "del123").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "token del123 not found") {
		t.Errorf("deleting a deleted token: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, "cluster-info signed for the token", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "configmap", "-n", "kube-public", "cluster-info", "-o", "jsonpath={.data.jws-kubeconfig-"+id+"}")
		return strings.Count(out, ".") == 2, out
	})
	checkAnonymousClusterInfo(t, s.listen)

	// A node namespace with its network, whose own agent is stopped: the joining agent
	// takes its place without the credentials `node add` wrote.
	if out, err := exec.Command(trancheBin, "node", "add", "jn", "--data-dir", c.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("tranche node add: %v\n%s", err, out)
	}
	nodeDir := filepath.Join(c.dataDir, "nodes", "jn")
	stopAgentByPIDFile(t, filepath.Join(nodeDir, "agent.pid"))
	if err := os.Remove(filepath.Join(nodeDir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	// As for a machine reinstalled under its old name: its Node, still Ready, goes first
	// (a bootstrap token may not take over a Ready node's identity; checked below).
	s.must(t, "delete", "node", "jn")
	netns := c.prefix + "jn"
	// nsenter enters the network namespace alone (ip netns exec would also remount
	// /sys, hiding the cgroup file system the agent needs), as `tranche up` starts agents.
	// The node joins a `tranche up` cluster, whose nodes share one bridge: --backend none,
	// as `tranche up` runs its own agents.
	agentArgs := func(root string, args ...string) []string {
		return append([]string{"--net=/run/netns/" + netns, "--", trancheBin, "agent", "--node-name", "jn", "--cluster-file",
			filepath.Join(c.dataDir, "cluster.json"), "--root-dir", root, "--backend", "none"}, args...)
	}

	t.Run("faults", func(t *testing.T) {
		s.mustStdin(t, badTokens(time.Now()), "apply", "-f", "-")
		t.Cleanup(func() {
			_, _, _ = s.kubectl(t, "", "patch", "secret", "-n", "kube-system", "bootstrap-token-exp123", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		})
		eventually(t, 30*time.Second, "tokencleaner deletes the expired token", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "secret", "-n", "kube-system", "bootstrap-token-exp123", "-o", "jsonpath={.metadata.deletionTimestamp}")
			return out != "", out
		})
		other := strings.Repeat("0", 64)
		for _, f := range []struct{ name, token, hash, want string }{
			{"wrong secret", id + ".0000000000000000", hash, "wrong token"},
			{"unknown token", "zzzzzz.zzzzzzzzzzzzzzzz", hash, "wrong token"},
			{"expired token", "exp123.0123456789abcdef", hash, "expired token"},
			{"token without signing usage", "nosig1.0123456789abcdef", hash, "not valid for signing"},
			{"CA hash mismatch", token, "sha256:" + other, "CA hash mismatch"},
			{"malformed token", "abc", hash, `token "abc" is not of the form`},
		} {
			t.Run(f.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				root := filepath.Join(t.TempDir(), "nodes", "jn")
				out, err := exec.CommandContext(ctx, "nsenter", agentArgs(root, "--server", server, "--token", f.token, "--ca-cert-hash", f.hash,
					"--discovery-timeout", "2s")...).CombinedOutput()
				if err == nil || !strings.Contains(string(out), f.want) {
					t.Fatalf("agent with %s: err %v, want a failure saying %q:\n%s", f.name, err, f.want, tail(string(out), 2000))
				}
				if strings.Contains(string(out), "0123456789abcdef") {
					t.Errorf("the output shows a token's secret:\n%s", out)
				}
			})
		}
	})

	logf, err := os.Create(filepath.Join(nodeDir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	agent := exec.Command("nsenter", agentArgs(nodeDir, "--server", server, "--token", token, "--ca-cert-hash", hash)...)
	agent.Stdout, agent.Stderr = logf, logf
	agent.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	// `tranche down` stops the agent recorded here; the cleanup stops it first.
	if err := os.WriteFile(filepath.Join(nodeDir, "agent.pid"), []byte(strconv.Itoa(agent.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopGroup(agent)
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("joined agent's log (end):\n%s", tail(string(log), 6000))
		}
	})
	eventually(t, 90*time.Second, "the joining agent's CSR approved and issued", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "csr", "-o", `jsonpath={range .items[?(@.spec.username=="system:bootstrap:`+id+`")]}{.spec.signerName} {.status.conditions[0].type} {.status.certificate}{"\n"}{end}`)
		return strings.HasPrefix(out, "kubernetes.io/kube-apiserver-client-kubelet Approved LS0t"), tail(out, 200)
	})
	if got := s.must(t, "get", "csr"); !strings.Contains(got, "system:bootstrap:"+id) || !strings.Contains(got, "Approved,Issued") {
		t.Errorf("kubectl get csr:\n%s", got)
	}
	ns := s.namespace(t)
	s.mustStdin(t, `apiVersion: v1
kind: Pod
metadata: {name: on-joined}
spec:
  nodeName: jn
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["pause"]
`, "apply", "-n", ns, "-f", "-")
	c.waitReady(t, ns, "on-joined")

	// The token used again for the name of the joined node, which is Ready: refused, so
	// that a token's holder cannot take over a live node's identity.
	t.Run("token reused for a Ready node", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		root := filepath.Join(t.TempDir(), "nodes", "jn")
		out, err := exec.CommandContext(ctx, "nsenter", agentArgs(root, "--server", server, "--token", token, "--ca-cert-hash", hash)...).CombinedOutput()
		if want := `node "jn" is registered and Ready`; err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("a second join as jn: err %v, want a failure saying %q:\n%s", err, want, tail(string(out), 2000))
		}
	})

	// The joined identity (its kubeconfig points into the cluster network).
	asNode := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + netns, "--", kubectlBin, "--kubeconfig",
			filepath.Join(nodeDir, "kubeconfig")}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := asNode("auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); err != nil ||
		!strings.HasPrefix(out, "system:node:jn ") || !strings.Contains(out, "system:nodes") {
		t.Fatalf("whoami as the joined node: %v\n%s", err, out)
	}
	if out, err := asNode("annotate", "node", "jn", "e2e.tranche.dev/joined=yes"); err != nil {
		t.Fatalf("the node annotating itself: %v\n%s", err, out)
	}
	if out, err := asNode("annotate", "lease", "-n", "kube-node-lease", "jn", "e2e.tranche.dev/joined=yes"); err != nil {
		t.Fatalf("the node annotating its own Lease: %v\n%s", err, out)
	}
	others := strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	for _, other := range others {
		if other == "jn" {
			continue
		}
		for _, args := range [][]string{{"annotate", "node", other}, {"annotate", "lease", "-n", "kube-node-lease", other}} {
			out, err := asNode(append(args, "e2e.tranche.dev/joined=yes")...)
			if err == nil || !strings.Contains(out, "Forbidden") {
				t.Errorf("the joined node: kubectl %s: err %v, want Forbidden:\n%s", strings.Join(args, " "), err, out)
			}
		}
	}

	// kubectl certificate approve|deny on requests made by hand.
	for i, verb := range []string{"approve", "deny"} {
		name := fmt.Sprintf("e2e-%s-%d", verb, i)
		s.mustStdin(t, handCSR(name), "apply", "-f", "-")
		t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "csr", name) })
		s.must(t, "certificate", verb, name)
		want := map[string]string{"approve": "Approved", "deny": "Denied"}[verb]
		if got := s.must(t, "get", "csr", name, "-o", "jsonpath={.status.conditions[0].type}"); got != want {
			t.Errorf("after kubectl certificate %s: condition %q, want %q", verb, got, want)
		}
	}
}

// checkAnonymousClusterInfo: cluster-info answers without credentials, other objects
// do not.
func checkAnonymousClusterInfo(t *testing.T, listen string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for path, want := range map[string]int{
		"/api/v1/namespaces/kube-public/configmaps/cluster-info": http.StatusOK,
		"/api/v1/namespaces/kube-system/configmaps/kube-proxy":   http.StatusUnauthorized,
		"/api/v1/namespaces/kube-public/configmaps":              http.StatusUnauthorized,
	} {
		resp, err := hc.Get("https://" + listen + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("anonymous GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// badTokens are an expired token (kept by a finalizer after tokencleaner deletes it, so
// that the API server still knows it expired) and one not valid for signing.
func badTokens(now time.Time) string {
	return `apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-exp123, namespace: kube-system, finalizers: [e2e.tranche.dev/keep]}
type: bootstrap.kubernetes.io/token
stringData:
  token-id: exp123
  token-secret: 0123456789abcdef
  expiration: "` + now.Add(-time.Hour).UTC().Format(time.RFC3339) + `"
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token
---
apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-nosig1, namespace: kube-system}
type: bootstrap.kubernetes.io/token
stringData:
  token-id: nosig1
  token-secret: 0123456789abcdef
  usage-bootstrap-authentication: "true"
  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token
`
}

// handCSR is a kube-apiserver-client request with a fixed key (no signer runs for it).
func handCSR(name string) string {
	return `apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: ` + name + `}
spec:
  signerName: kubernetes.io/kube-apiserver-client
  usages: [client auth]
  request: ` + handCSRPEM + `
`
}

// handCSRPEM is a base64 PEM CSR for CN=e2e-user (openssl req, ECDSA P-256).
const handCSRPEM = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlITk1IVUNBUUF3RXpFUk1BOEdBMVVFQXd3SVpUSmxMWFZ6WlhJd1dUQVRCZ2NxaGtqT1BRSUJCZ2dxaGtqTwpQUU1CQndOQ0FBVDRjZU8wSFFGVnozeWN4VjE1RDczZXZwaFlxU2dPa1Z6UDlGTm9YdVBXNERjaUtnbVZCSzh6CldlMEJyaXA0MUo4YVZyeGlvYUVjdE4rU1JjYms1NFFWb0FBd0NnWUlLb1pJemowRUF3SURTQUF3UlFJaEFJaCsKcWw0aHA1eitiTVg2QWVkc29sbWRhSHRzNDlVZDh5ZXJDN3VMNHdSR0FpQUJJelpHU0FlSmlqSGlyU0dNaWx4WQpoeTFoQ29oL0NIekdaQitTdk02dy93PT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg=="

// stopAgentByPIDFile stops the agent whose session leader's pid is in path.
func stopAgentByPIDFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// "<pid> <start time>", as internal/cluster records it.
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		t.Fatalf("agent pid file %s is empty", path)
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 1 {
		t.Fatalf("agent pid file %s: %q", path, data)
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	eventually(t, 30*time.Second, "node add's agent stopped", func() (bool, string) {
		return syscall.Kill(pid, 0) != nil, "running"
	})
}

// stopGroup stops a process started in a session of its own and reaps it.
func stopGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
