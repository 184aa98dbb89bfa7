package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// inNodeNS runs a command in the network namespace of the node a pod runs on, as a
// client elsewhere in the cluster would, with a deadline.
func (c *localCluster) inNodeNS(t *testing.T, ns, pod string, env []string, argv ...string) (string, error) {
	t.Helper()
	node := c.srv.must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.prefix + node}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const nginxPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    ports:
    - containerPort: 80
`

// TestNginxImage: an nginx pod (seed 003's image, from the node's catalog: Debian's
// nginx as an image) serves its welcome page on port 80 of its pod IP, answers 404
// for the rest, reports the image as kubelet does and logs its requests on its output
// as the official image does.
func TestNginxImage(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, nginxPod, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "web")
	ip := s.must(t, "get", "pod", "web", "-n", ns, "-o", "jsonpath={.status.podIP}")
	var page string
	eventually(t, 20*time.Second, "nginx's welcome page on "+ip+":80", func() (bool, string) {
		out, err := c.inNodeNS(t, ns, "web", nil, "busybox", "wget", "-qO-", "http://"+ip+"/")
		page = out
		return err == nil && strings.Contains(out, "<title>Welcome to nginx!</title>"), fmt.Sprintf("%v %s", err, out)
	})
	if out, err := c.inNodeNS(t, ns, "web", nil, "busybox", "wget", "-qO-", "http://"+ip+"/missing"); err == nil {
		t.Errorf("GET /missing succeeded: %s", out)
	}
	// kubelet's wording: the catalog image is present, or was just built ("pulled").
	pulled := regexp.MustCompile(`^(Container image "nginx:1\.27" already present on machine|Successfully pulled image "nginx:1\.27" in .+)$`)
	eventually(t, 10*time.Second, "kubelet's Pulled event for the image", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=web,reason=Pulled", "-o", "jsonpath={.items[*].message}")
		return pulled.MatchString(out), out
	})
	status := s.must(t, "get", "pod", "web", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].image} {.status.containerStatuses[0].imageID}")
	if !regexp.MustCompile(`^(docker\.io/library/)?nginx:1\.27 \S*@?sha256:[0-9a-f]{64}$`).MatchString(status) {
		t.Errorf("containerStatuses image and imageID: %q, want the name and the image's digest", status)
	}
	eventually(t, 10*time.Second, "the access log on the container's output", func() (bool, string) {
		log := c.podLog(t, ns, "web", "nginx")
		return strings.Contains(log, `stdout F `) && strings.Contains(log, `"GET / HTTP/1.1" 200`), log + page
	})
}

const postgresPods = `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-db
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata:
  name: db
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: postgres
    image: postgres:16
    env:
    - {name: POSTGRES_PASSWORD, value: s3cret}
    - {name: POSTGRES_DB, value: app}
    ports:
    - containerPort: 5432
    readinessProbe:
      tcpSocket: {port: 5432}
      periodSeconds: 1
    volumeMounts:
    - {name: data, mountPath: /var/lib/postgresql/data}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data-db}
`

// postgresNoPassword is the same container without POSTGRES_PASSWORD, which the image
// refuses to initialise a database without.
const postgresNoPassword = `apiVersion: v1
kind: Pod
metadata:
  name: nopass
spec:
  restartPolicy: Never
  containers:
  - name: postgres
    image: postgres:16
`

// TestPostgresImage: a postgres pod shaped like seed 000's StatefulSet pods, its data
// directory (PGDATA) on a claim, takes password connections from the cluster network
// with psql and local ones with the image's own psql; without POSTGRES_PASSWORD the
// image refuses to start, as the official one does; a row written survives deleting
// the pod and starting another on the same claim, which does not initialise again.
func TestPostgresImage(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, postgresNoPassword)
	psql := func(sql string) (string, error) {
		ip := s.must(t, "get", "pod", "db", "-n", ns, "-o", "jsonpath={.status.podIP}")
		return c.inNodeNS(t, ns, "db", []string{"PGPASSWORD=s3cret", "PGCONNECT_TIMEOUT=5"},
			"psql", "-h", ip, "-U", "postgres", "-d", "app", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql)
	}
	start := func() {
		t.Helper()
		c.apply(t, ns, postgresPods)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("postgres output:\n%s", tail(c.podLog(t, ns, "db", "postgres"), 3000))
			}
		})
		c.waitReady(t, ns, "db")
	}
	start()
	if out, err := psql("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('row-1');"); err != nil {
		t.Fatalf("psql create: %v\n%s", err, out)
	}
	ip := s.must(t, "get", "pod", "db", "-n", ns, "-o", "jsonpath={.status.podIP}")
	if out, err := c.inNodeNS(t, ns, "db", []string{"PGPASSWORD=wrong", "PGCONNECT_TIMEOUT=5"},
		"psql", "-h", ip, "-U", "postgres", "-d", "app", "-c", "SELECT 1"); err == nil || !strings.Contains(out, "password authentication failed") {
		t.Errorf("a wrong password was not refused: %v\n%s", err, out)
	}
	// Inside the container, the image's psql over the local socket, as `kubectl exec
	// -it db -- psql -U postgres` at a terminal.
	out, errOut, err := s.kubectl(t, "", "exec", "db", "-n", ns, "--", "psql", "-U", "postgres", "-d", "app", "-X", "-A", "-t",
		"-c", "SELECT current_setting('data_directory'), count(*) FROM kept")
	if err != nil || strings.TrimSpace(out) != "/var/lib/postgresql/data|1" {
		t.Errorf("psql in the container: %v %q %s; want the data directory on the volume and the row", err, out, errOut)
	}
	// PGDATA is the claim's directory on the node, not the container's own layer.
	pv := s.must(t, "get", "pvc", "data-db", "-n", ns, "-o", "jsonpath={.spec.volumeName}")
	dir := s.must(t, "get", "pv", pv, "-o", "jsonpath={.spec.hostPath.path}")
	if v, err := os.ReadFile(filepath.Join(dir, "PG_VERSION")); err != nil || !regexp.MustCompile(`^\d+\n$`).Match(v) {
		t.Errorf("no database in the claim's directory %s: %q %v", dir, v, err)
	}

	eventually(t, 30*time.Second, "the pod without a password failed", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "nopass", "-n", ns, "-o", "jsonpath={.status.phase} {.status.containerStatuses[0].state.terminated.exitCode}")
		return regexp.MustCompile(`^Failed [1-9]\d*$`).MatchString(out), out
	})
	if log := s.must(t, "logs", "nopass", "-n", ns); !strings.Contains(log, "Database is uninitialized and superuser password is not specified") ||
		!strings.Contains(log, "POSTGRES_PASSWORD") {
		t.Errorf("the image's refusal without POSTGRES_PASSWORD:\n%s", log)
	}

	s.must(t, "delete", "pod", "db", "-n", ns)
	start()
	out, err = psql("SELECT v FROM kept;")
	if err != nil || strings.TrimSpace(out) != "row-1" {
		t.Fatalf("the row after the pod was replaced: %v %q", err, out)
	}
	if log := c.podLog(t, ns, "db", "postgres"); !strings.Contains(log, "Skipping initialization") {
		t.Errorf("the replacement initialised the database again:\n%s", tail(log, 2000))
	}
}
