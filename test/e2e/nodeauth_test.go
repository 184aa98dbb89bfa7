package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// asNode runs kubectl with node's own kubeconfig (user system:node:NAME, group
// system:nodes) against the cluster's loopback listener.
func (c *localCluster) asNode(t *testing.T, node string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kubeconfig := filepath.Join(c.dataDir, "nodes", node, "kubeconfig")
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--server", "https://" + c.listen}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECTL_KUBERC=false")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// nodeRefused runs kubectl as node and fails the test unless it is refused with an
// error containing want.
func (c *localCluster) nodeRefused(t *testing.T, node, want string, args ...string) {
	t.Helper()
	out, errOut, err := c.asNode(t, node, args...)
	if err == nil || !strings.Contains(errOut, want) {
		t.Fatalf("kubectl %s as node %s: err %v\nstdout: %s\nstderr: %s\nwant refusal containing: %s", strings.Join(args, " "), node, err, out, errOut, want)
	}
}

func (c *localCluster) nodeMust(t *testing.T, node string, args ...string) string {
	t.Helper()
	out, errOut, err := c.asNode(t, node, args...)
	if err != nil {
		t.Fatalf("kubectl %s as node %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), node, err, out, errOut)
	}
	return out
}

const nodeAuthPod = `apiVersion: v1
kind: Pod
metadata:
  name: holder
spec:
  nodeName: %s
  serviceAccountName: runner
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "cat /etc/creds/k /var/run/secrets/tokens/token >/dev/null && echo $FROM_CM && sleep 3600"]
    env:
    - name: FROM_CM
      valueFrom: {configMapKeyRef: {name: settings, key: mode}}
    volumeMounts:
    - {name: creds, mountPath: /etc/creds}
    - {name: token, mountPath: /var/run/secrets/tokens}
  volumes:
  - name: creds
    secret: {secretName: mounted}
  - name: token
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3600, audience: api}
`

// TestNodeAuthorizer: with a node's own kubeconfig and the real kubectl, a node reads
// the Secret a pod bound to it mounts and mints tokens for that pod's service account
// bound to that pod, and nothing else: no listing of Secrets, no Secret of another
// node's pod, no token for an unrelated account, no edits of another node or of
// restricted labels; it lists pods only with spec.nodeName=<itself> and reads only its
// own Node (Kubernetes' AuthorizeNodeWithSelectors). The pod itself runs, its secret, configMap env and projected
// token in place, under the agent's node identity.
func TestNodeAuthorizer(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	nodes := strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(nodes) < 2 {
		t.Fatalf("need two nodes, have %v", nodes)
	}
	nodeA, nodeB := nodes[0], nodes[1]
	s.must(t, "create", "secret", "generic", "mounted", "-n", ns, "--from-literal=k=v")
	s.must(t, "create", "secret", "generic", "unused", "-n", ns, "--from-literal=k=v")
	s.must(t, "create", "configmap", "settings", "-n", ns, "--from-literal=mode=on")
	s.must(t, "create", "serviceaccount", "runner", "-n", ns)
	s.must(t, "create", "serviceaccount", "adm", "-n", ns)
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(nodeAuthPod, nodeA), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply pod: %v\n%s", err, errOut)
	}
	c.waitReady(t, ns, "holder")
	uid := s.must(t, "get", "pod", "holder", "-n", ns, "-o", "jsonpath={.metadata.uid}")

	noRelation := func(node string) string {
		return fmt.Sprintf("no relationship found between node '%s' and this object", node)
	}
	t.Run("list secrets", func(t *testing.T) {
		c.nodeRefused(t, nodeA, `secrets is forbidden: User "system:node:`+nodeA+`" cannot list resource "secrets" in API group "" at the cluster scope: can only read namespaced object of this type`,
			"get", "secrets", "-A")
		c.nodeRefused(t, nodeA, "No Object name found", "get", "secrets", "-n", ns)
	})
	t.Run("get secrets", func(t *testing.T) {
		if out := c.nodeMust(t, nodeA, "get", "secret", "mounted", "-n", ns, "-o", "jsonpath={.data.k}"); out != "dg==" {
			t.Errorf("secret data %q", out)
		}
		c.nodeMust(t, nodeA, "get", "configmap", "settings", "-n", ns)
		c.nodeRefused(t, nodeB, `secrets "mounted" is forbidden: User "system:node:`+nodeB+`" cannot get resource "secrets" in API group "" in the namespace "`+ns+`": `+noRelation(nodeB),
			"get", "secret", "mounted", "-n", ns)
		c.nodeRefused(t, nodeA, noRelation(nodeA), "get", "secret", "unused", "-n", ns)
	})
	t.Run("tokens", func(t *testing.T) {
		c.nodeRefused(t, nodeA, `serviceaccounts "adm" is forbidden: User "system:node:`+nodeA+`" cannot create resource "serviceaccounts/token" in API group "" in the namespace "`+ns+`": `+noRelation(nodeA),
			"create", "token", "adm", "-n", ns)
		c.nodeRefused(t, nodeA, `serviceaccounts "runner" is forbidden: node requested token not bound to a pod`,
			"create", "token", "runner", "-n", ns)
		c.nodeRefused(t, nodeB, noRelation(nodeB), "create", "token", "runner", "-n", ns,
			"--bound-object-kind", "Pod", "--bound-object-name", "holder", "--bound-object-uid", uid)
		token := strings.TrimSpace(c.nodeMust(t, nodeA, "create", "token", "runner", "-n", ns,
			"--bound-object-kind", "Pod", "--bound-object-name", "holder", "--bound-object-uid", uid))
		if strings.Count(token, ".") != 2 {
			t.Errorf("token is not a JWT: %q", token)
		}
	})
	t.Run("list with selectors", func(t *testing.T) {
		c.nodeRefused(t, nodeA, `pods is forbidden: User "system:node:`+nodeA+`" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`,
			"get", "pods", "-A")
		c.nodeRefused(t, nodeA, "can only list/watch pods with spec.nodeName field selector",
			"get", "pods", "-A", "--field-selector", "spec.nodeName="+nodeB)
		if out := c.nodeMust(t, nodeA, "get", "pods", "-A", "--field-selector", "spec.nodeName="+nodeA, "-o", "jsonpath={.items[*].metadata.name}"); !strings.Contains(out, "holder") {
			t.Errorf("node %s's own pods %q lack holder", nodeA, out)
		}
		c.nodeRefused(t, nodeA, `nodes is forbidden: User "system:node:`+nodeA+`" cannot list resource "nodes" in API group "" at the cluster scope: node '`+nodeA+`' cannot read all nodes, only its own Node object`,
			"get", "nodes")
		c.nodeRefused(t, nodeA, fmt.Sprintf(`nodes "%s" is forbidden: User "system:node:%s" cannot get resource "nodes" in API group "" at the cluster scope: node '%s' cannot read '%s', only its own Node object`, nodeB, nodeA, nodeA, nodeB),
			"get", "node", nodeB)
		if out := c.nodeMust(t, nodeA, "get", "nodes", "--field-selector", "metadata.name="+nodeA, "-o", "jsonpath={.items[*].metadata.name}"); out != nodeA {
			t.Errorf("nodes selected by metadata.name=%s: %q", nodeA, out)
		}
		c.nodeMust(t, nodeA, "get", "node", nodeA)
	})
	t.Run("node labels", func(t *testing.T) {
		// kubectl label reads the node first, which a node may do only for its own.
		c.nodeRefused(t, nodeA, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", nodeA, nodeB),
			"label", "node", nodeB, "example.com/stolen=yes")
		// A write without the read reaches NodeRestriction.
		stolen := filepath.Join(t.TempDir(), "node.json")
		body := s.must(t, "label", "node", nodeB, "example.com/stolen=yes", "--dry-run=client", "-o", "json")
		if err := os.WriteFile(stolen, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		c.nodeRefused(t, nodeA, fmt.Sprintf(`nodes "%s" is forbidden: node "%s" is not allowed to modify node "%s"`, nodeB, nodeA, nodeB),
			"replace", "--raw", "/api/v1/nodes/"+nodeB, "-f", stolen)
		c.nodeRefused(t, nodeA, fmt.Sprintf(`nodes "%s" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool`, nodeA),
			"label", "node", nodeA, "node-restriction.kubernetes.io/pool=gpu")
		c.nodeRefused(t, nodeA, "is not allowed to modify labels: node-role.kubernetes.io/control-plane",
			"label", "node", nodeA, "node-role.kubernetes.io/control-plane=")
		c.nodeMust(t, nodeA, "label", "node", nodeA, "example.com/own=yes")
		c.nodeMust(t, nodeA, "label", "node", nodeA, "example.com/own-")
		if out := s.must(t, "get", "node", nodeB, "-o", "jsonpath={.metadata.labels}"); strings.Contains(out, "stolen") {
			t.Errorf("node %s was relabelled: %s", nodeB, out)
		}
	})
	t.Run("pod gone", func(t *testing.T) {
		s.must(t, "delete", "pod", "holder", "-n", ns, "--grace-period=1", "--wait=true", "--timeout=60s")
		eventually(t, 30*time.Second, "node "+nodeA+" refused the Secret once its pod is gone", func() (bool, string) {
			_, errOut, err := c.asNode(t, nodeA, "get", "secret", "mounted", "-n", ns)
			return err != nil && strings.Contains(errOut, noRelation(nodeA)), errOut
		})
	})
}
