package e2e

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/tranche/tranche/internal/netns"
)

// e2eRegistry is go-containerregistry's registry served by the test process on a socket
// opened inside the cluster's underlay namespace (<prefix>net), so the node agents reach
// it and nothing listens on the host. Repositories under private/ need user:pass.
// The test pushes through a second listener of the same registry on the host's
// loopback.
type e2eRegistry struct {
	addr  string
	local string // 127.0.0.1:port
}

// port "0" picks a free one.
func startE2ERegistry(t *testing.T, c *localCluster, port string) *e2eRegistry {
	t.Helper()
	underlay := c.prefix + "net"
	out, err := exec.Command("ip", "-n", underlay, "-4", "-o", "addr", "show").Output()
	if err != nil {
		t.Fatalf("addresses of %s: %v", underlay, err)
	}
	var ip string
	for _, f := range strings.Fields(string(out)) {
		if p, _, ok := strings.Cut(f, "/"); ok && net.ParseIP(p) != nil && !strings.HasPrefix(p, "127.") {
			ip = p
			break
		}
	}
	if ip == "" {
		t.Fatalf("no address in %s: %s", underlay, out)
	}
	ln, err := netns.Listen(underlay, "tcp4", net.JoinHostPort(ip, port))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	// Blobs of repositories under stall/ are never served to the nodes: a pull of
	// them hangs until the agent gives up.
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/stall/") && strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet && r.Host != "" && !strings.HasPrefix(r.Host, "127.") {
			select {
			case <-r.Context().Done():
			case <-stall:
			}
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v2/private/") {
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
				w.Header().Set("WWW-Authenticate", `Basic realm="e2e"`)
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		reg.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	local := httptest.NewServer(h)
	t.Cleanup(local.Close)
	return &e2eRegistry{addr: ln.Addr().String(), local: strings.TrimPrefix(local.URL, "http://")}
}

// push builds an image of busybox-static's httpd serving page on port 8080 and pushes
// it as repo:tag; it returns the manifest digest.
func (r *e2eRegistry) push(t *testing.T, repoTag, page string) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image,
		e2eLayer(t, map[string][]byte{"bin/busybox": bb}, 0o755),
		e2eLayer(t, map[string][]byte{"www/index.html": []byte(page)}, 0o644))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = []string{"/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.local + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "user", Password: "pass"})); err != nil {
		t.Fatalf("push %s: %v", repoTag, err)
	}
	d, _ := img.Digest()
	return d.String()
}

func e2eLayer(t *testing.T, files map[string][]byte, mode int64) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for p, data := range files {
		if d, _, ok := strings.Cut(p, "/"); ok && !dirs[d] {
			dirs[d] = true
			tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir})
		}
		tw.WriteHeader(&tar.Header{Name: p, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	tw.Close()
	raw := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

const registryWeb = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: %s
        ports: [{containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`

const registryPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  %s
  containers:
  - name: web
    image: %s
    imagePullPolicy: %s
`

// TestRegistryPull: images that only a registry started by the test has (in the
// cluster's underlay namespace) run: a Deployment serves through its Service and
// reports the digest as imageID, after kubelet's Pulling and Pulled events; a private
// repository is ErrImagePull then ImagePullBackOff without the pod's imagePullSecret
// and runs with it or its ServiceAccount's; after the tag moved, IfNotPresent keeps the old digest and Always
// gets the new one.
func TestRegistryPull(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	reg := startE2ERegistry(t, c, "0")

	d1 := reg.push(t, "e2e/web:v1", "hello from the registry v1")
	image := reg.addr + "/e2e/web:v1"
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryWeb, image), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	var pod string
	eventually(t, 60*time.Second, "the Deployment's pod Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=web", "-o",
			`jsonpath={.items[0].metadata.name} {.items[0].status.conditions[?(@.type=="Ready")].status} {.items[0].status.containerStatuses[0].state}`)
		f := strings.Fields(out)
		if len(f) >= 2 {
			pod = f[0]
		}
		return len(f) >= 2 && f[1] == "True", out
	})
	if got := s.must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].imageID}"); got != reg.addr+"/e2e/web@"+d1 {
		t.Errorf("imageID %q, want %s", got, reg.addr+"/e2e/web@"+d1)
	}
	clusterIP := s.must(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	eventually(t, 20*time.Second, "the page through the Service", func() (bool, string) {
		out, err := c.inNodeNS(t, ns, pod, nil, "busybox", "wget", "-qO-", "http://"+clusterIP+"/")
		return err == nil && strings.Contains(out, "hello from the registry v1"), fmt.Sprintf("%v %s", err, out)
	})
	events := s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+pod, "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
	for _, want := range []string{
		fmt.Sprintf("Pulling: Pulling image %q", image),
		fmt.Sprintf("Pulled: Successfully pulled image %q in ", image),
	} {
		if !strings.Contains(events, want) {
			t.Errorf("events lack %q:\n%s", want, events)
		}
	}
	if !strings.Contains(events, "including waiting). Image size: ") {
		t.Errorf("Pulled event without kubelet's duration and size:\n%s", events)
	}

	// A private repository.
	private := reg.addr + "/private/web:v1"
	reg.push(t, "private/web:v1", "private page")
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryPod, "nosecret", "", private, "IfNotPresent"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	// ErrImagePull shows in the status only until the next sync (then the pull backs
	// off), so it is checked in the events, as kubelet records it.
	var msg string
	eventually(t, 45*time.Second, "ImagePullBackOff without the pull secret", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "nosecret", "-n", ns, "-o", `jsonpath={.status.containerStatuses[0].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.message}`)
		reason, m, _ := strings.Cut(out, "|")
		msg = m
		return reason == "ImagePullBackOff", out
	})
	if !strings.HasPrefix(msg, fmt.Sprintf("Back-off pulling image %q: ErrImagePull: ", private)) || !strings.Contains(msg, "UNAUTHORIZED: authentication required") {
		t.Errorf("ImagePullBackOff message %q lacks the registry's answer", msg)
	}
	events = s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=nosecret", "-o", `jsonpath={range .items[*]}{.type} {.reason}: {.message}{"\n"}{end}`)
	for _, want := range []string{
		fmt.Sprintf("Warning Failed: Failed to pull image %q: ", private),
		"Warning Failed: Error: ErrImagePull",
		fmt.Sprintf("Normal BackOff: Back-off pulling image %q", private),
		"Warning Failed: Error: ImagePullBackOff",
	} {
		if !strings.Contains(events, want) {
			t.Errorf("events lack %q:\n%s", want, events)
		}
	}
	s.must(t, "create", "secret", "docker-registry", "regcred", "-n", ns, "--docker-server="+reg.addr, "--docker-username=user", "--docker-password=pass")
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryPod, "withsecret", "imagePullSecrets: [{name: regcred}]", private, "IfNotPresent"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitRunning(t, ns, "withsecret")
	// The ServiceAccount's imagePullSecrets reach pods that name none (admission).
	if _, errOut, err := s.kubectl(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: puller}\nimagePullSecrets: [{name: regcred}]\n", "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryPod, "viasa", "serviceAccountName: puller", private, "Always"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitRunning(t, ns, "viasa")

	// A tag moved: IfNotPresent keeps the stored digest, Always follows the tag.
	reg.push(t, "e2e/web:v1", "hello from the registry v2")
	d2 := reg.push(t, "e2e/web:v1", "hello from the registry v2")
	for _, tc := range []struct{ pod, policy, want string }{{"keeps", "IfNotPresent", d1}, {"follows", "Always", d2}} {
		if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryPod, tc.pod, "", image, tc.policy), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
		c.waitRunning(t, ns, tc.pod)
		if got := s.must(t, "get", "pod", tc.pod, "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].imageID}"); !strings.HasSuffix(got, "@"+tc.want) {
			t.Errorf("%s pod's imageID %q, want the digest %s", tc.policy, got, tc.want)
		}
	}

	// A pod deleted while its image pull hangs goes at once: the deletion cancels the
	// agent's sync, as kubelet's pod workers do. (It used to wait for the pull, which
	// gives up only after the transport's 30 s response-header timeout: hence 20 s.)
	stalled := reg.addr + "/stall/web:v1"
	reg.push(t, "stall/web:v1", "never served")
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryPod, "stalled", "terminationGracePeriodSeconds: 1", stalled, "Always"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	eventually(t, 30*time.Second, "the stalled pod's Pulling event", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=stalled,reason=Pulling", "-o", "name")
		return strings.TrimSpace(out) != "", out
	})
	// Meanwhile kubectl shows what a kubelet's node shows during a pull.
	eventually(t, 10*time.Second, "the stalled pod shown ContainerCreating", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "stalled", "-n", ns, "--no-headers")
		return strings.Contains(out, "ContainerCreating"), out
	})
	s.must(t, "delete", "pod", "stalled", "-n", ns, "--wait=true", "--timeout=20s")

	// Never with an image the node does not have: ErrImageNeverPull, nothing pulled.
	absent := reg.addr + "/e2e/absent:v1"
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryPod, "never", "", absent, "Never"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	eventually(t, 30*time.Second, "ErrImageNeverPull", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "never", "-n", ns, "-o", `jsonpath={.status.containerStatuses[0].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.message}`)
		return out == fmt.Sprintf("ErrImageNeverPull|Container image %q is not present with pull policy of Never", absent), out
	})
}

// waitRunning waits for a pod's phase Running.
func (c *localCluster) waitRunning(t *testing.T, ns, pod string) {
	t.Helper()
	eventually(t, 60*time.Second, "pod "+pod+" Running", func() (bool, string) {
		out, _, _ := c.srv.kubectl(t, "", "get", "pod", pod, "-n", ns, "-o", `jsonpath={.status.phase} {.status.containerStatuses[0].state}`)
		return strings.HasPrefix(out, "Running "), out
	})
}

// TestRegistriesFile: `tranche up --registries FILE` gives the agents the file: an image
// of a registry that does not exist comes through its mirror (the test's registry on
// the underlay at the default cluster listener address) with the credentials the file
// gives the mirror's host; a file with a mistake is refused, naming the field.
func TestRegistriesFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("mirrors:\n  docker.io:\n    endpoint: [\"ftp://mirror\"]\n"), 0o600)
	out, err := exec.Command(trancheBin, "up", "--data-dir", filepath.Join(dir, "data"), "--registries", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `mirrors."docker.io".endpoint[0]: unsupported scheme "ftp"`) {
		t.Errorf("up with a bad registries file: %v\n%s", err, out)
	}

	const mirror = "10.240.0.1:5000" // the default underlay's cluster listener address
	file := filepath.Join(dir, "registries.yaml")
	os.WriteFile(file, []byte(`mirrors:
  registry.invalid:
    endpoint: ["http://`+mirror+`"]
configs:
  "`+mirror+`":
    auth: {username: user, password: pass}
`), 0o600)
	c := upOwn(t, "rg", 1, "--registries", file)
	if state, _ := os.ReadFile(filepath.Join(c.dataDir, "cluster.json")); !strings.Contains(string(state), `"registries": "`+file+`"`) &&
		!strings.Contains(string(state), `"registries":"`+file+`"`) {
		t.Errorf("cluster.json does not record the registries file for agents started later:\n%s", state)
	}
	reg := startE2ERegistry(t, c, "5000")
	if reg.addr != mirror {
		t.Fatalf("the underlay's address is %s, not the default the file names (%s)", reg.addr, mirror)
	}
	d := reg.push(t, "private/web:v1", "through the mirror")
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(registryPod, "mirrored", "", "registry.invalid/private/web:v1", "IfNotPresent"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitRunning(t, ns, "mirrored")
	if got := s.must(t, "get", "pod", "mirrored", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].imageID}"); got != "registry.invalid/private/web@"+d {
		t.Errorf("imageID %q, want registry.invalid/private/web@%s", got, d)
	}
}
