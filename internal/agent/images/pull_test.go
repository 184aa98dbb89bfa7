package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
	"github.com/tranche/tranche/internal/registries"
)

// testRegistry is go-containerregistry's in-process registry behind httptest, counting
// requests per kind, with an optional private repository (basic auth) and hooks that
// replace responses to exercise bad input.
type testRegistry struct {
	srv       *httptest.Server
	host      string
	manifests atomic.Int64
	blobs     atomic.Int64
	// private repositories need user:pass.
	private string
	// override, when set, may answer a request instead of the registry.
	mu       sync.Mutex
	override func(w http.ResponseWriter, r *http.Request) bool
}

func newTestRegistry(t testing.TB) *testRegistry {
	t.Helper()
	tr := &testRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tr.private != "" && strings.HasPrefix(r.URL.Path, "/v2/"+tr.private+"/") {
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"access to the requested resource is not authorized"}]}`)
				return
			}
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/") {
			tr.manifests.Add(1)
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			tr.blobs.Add(1)
		}
		tr.mu.Lock()
		o := tr.override
		tr.mu.Unlock()
		if o != nil && o(w, r) {
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.srv.Close)
	tr.host = strings.TrimPrefix(tr.srv.URL, "http://")
	return tr
}

func (tr *testRegistry) setOverride(o func(w http.ResponseWriter, r *http.Request) bool) {
	tr.mu.Lock()
	tr.override = o
	tr.mu.Unlock()
}

// push writes img (or an index) under repo:tag, bypassing the private check.
func (tr *testRegistry) push(t testing.TB, ref string, img v1.Image) string {
	t.Helper()
	priv := tr.private
	tr.private = ""
	defer func() { tr.private = priv }()
	r, err := name.ParseReference(tr.host + "/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d.String()
}

// tarLayer is a layer holding files (path -> content).
func tarLayer(t testing.TB, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for p, c := range files {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(c))
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage is an image of the node's platform with one layer per content string.
func testImage(t testing.TB, arch string, contents ...string) v1.Image {
	t.Helper()
	img := empty.Image
	for i, c := range contents {
		var err error
		img, err = mutate.AppendLayers(img, tarLayer(t, map[string]string{fmt.Sprintf("f%d", i): c}))
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Cmd = []string{"/f0"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// newTestService is a Service on a new store whose pulls reach loopback addresses
// only: nothing a test does leaves the machine.
func newTestService(t testing.TB, opts ...Option) (*Service, *imagestore.Store) {
	t.Helper()
	store, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return New(store, imagebuild.Source{}, append([]Option{WithTransport(loopbackOnly())}, opts...)...), store
}

// loopbackOnly is a transport that dials 127.0.0.0/8 literals only.
func loopbackOnly() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("test: dial %s refused, not a loopback address", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return t
}

func pullErr(t *testing.T, err error, reason string) *PullError {
	t.Helper()
	var pe *PullError
	if !errors.As(err, &pe) || pe.Reason != reason {
		t.Fatalf("error %v (%T), want a PullError %s", err, err, reason)
	}
	return pe
}

// TestPullIndexResolvesPlatform: an OCI index with an arm64 and the node's image gives
// the node's one, stored under the name and repo@digest, its layers unpacked.
func TestPullIndexResolvesPlatform(t *testing.T) {
	tr := newTestRegistry(t)
	other := "arm64"
	if goruntime.GOARCH == "arm64" {
		other = "amd64"
	}
	mine := testImage(t, goruntime.GOARCH, "mine")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: testImage(t, other, "other"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}},
		mutate.IndexAddendum{Add: mine, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}}})
	r, _ := name.ParseReference(tr.host + "/multi/app:1")
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	s, store := newTestService(t)
	res, err := s.EnsurePulled(context.Background(), PullRequest{Image: tr.host + "/multi/app:1", BackOffKey: "uid"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mine.Digest()
	if !res.Pulled || res.Image.Digest != want.String() {
		t.Fatalf("pulled=%v digest %s, want the %s image %s", res.Pulled, res.Image.Digest, goruntime.GOARCH, want)
	}
	if _, err := store.Get(tr.host + "/multi/app@" + want.String()); err != nil {
		t.Errorf("repo@digest not stored: %v", err)
	}
	if _, err := store.Lowers(context.Background(), res.Image); err != nil {
		t.Errorf("layers: %v", err)
	}
}

// TestPullPolicies: IfNotPresent and Never use the stored image without asking the
// registry; Always asks and follows a moved tag, IfNotPresent keeps the old digest;
// Never without the image is kubelet's ErrImageNeverPull.
func TestPullPolicies(t *testing.T) {
	tr := newTestRegistry(t)
	ctx := context.Background()
	ref := tr.host + "/app:v1"
	d1 := tr.push(t, "app:v1", testImage(t, goruntime.GOARCH, "one"))
	s, _ := newTestService(t)

	_, err := s.EnsurePulled(ctx, PullRequest{Image: ref, Policy: corev1.PullNever, BackOffKey: "u"})
	if pe := pullErr(t, err, ReasonErrImageNeverPull); pe.Message != fmt.Sprintf("Container image %q is not present with pull policy of Never", ref) {
		t.Errorf("message %q", pe.Message)
	}
	pulling := 0
	res, err := s.EnsurePulled(ctx, PullRequest{Image: ref, Policy: corev1.PullIfNotPresent, BackOffKey: "u", OnPull: func() { pulling++ }})
	if err != nil || !res.Pulled || res.Image.Digest != d1 || pulling != 1 {
		t.Fatalf("first IfNotPresent: %+v %v pulling=%d", res, err, pulling)
	}
	before, manifests := s.Fetched(), tr.manifests.Load()
	for _, p := range []corev1.PullPolicy{corev1.PullIfNotPresent, corev1.PullNever} {
		res, err := s.EnsurePulled(ctx, PullRequest{Image: ref, Policy: p, BackOffKey: "u", OnPull: func() { pulling++ }})
		if err != nil || res.Pulled || res.Image.Digest != d1 {
			t.Errorf("%s with the image present: %+v %v", p, res, err)
		}
	}
	if s.Fetched() != before || tr.manifests.Load() != manifests || pulling != 1 {
		t.Errorf("present image: %d bytes fetched, %d manifest requests, %d pulls", s.Fetched()-before, tr.manifests.Load()-manifests, pulling-1)
	}

	d2 := tr.push(t, "app:v1", testImage(t, goruntime.GOARCH, "two"))
	if res, err := s.EnsurePulled(ctx, PullRequest{Image: ref, Policy: corev1.PullIfNotPresent, BackOffKey: "u"}); err != nil || res.Image.Digest != d1 {
		t.Errorf("IfNotPresent after the tag moved: %s %v, want the old %s", res.Image.Digest, err, d1)
	}
	if res, err := s.EnsurePulled(ctx, PullRequest{Image: ref, Policy: corev1.PullAlways, BackOffKey: "u"}); err != nil || !res.Pulled || res.Image.Digest != d2 {
		t.Errorf("Always after the tag moved: %s %v, want the new %s", res.Image.Digest, err, d2)
	}
	// Always again: only the manifest is asked for, no layer is fetched again.
	blobs := tr.blobs.Load()
	if res, err := s.EnsurePulled(ctx, PullRequest{Image: ref, Policy: corev1.PullAlways, BackOffKey: "u"}); err != nil || res.Image.Digest != d2 {
		t.Errorf("Always again: %v", err)
	}
	if n := tr.blobs.Load() - blobs; n != 0 {
		t.Errorf("Always of a present image fetched %d blobs", n)
	}
	for ref, want := range map[string]corev1.PullPolicy{"a/b": corev1.PullAlways, "a/b:latest": corev1.PullAlways,
		"h:5000/b": corev1.PullAlways, "h:5000/b:1": corev1.PullIfNotPresent, "b@sha256:" + strings.Repeat("a", 64): corev1.PullIfNotPresent} {
		if got := DefaultPolicy(ref); got != want {
			t.Errorf("DefaultPolicy(%q) = %s, want %s", ref, got, want)
		}
	}
}

// TestPullCatalogFirst: a catalog name is the local build without any registry, unless
// the registries configuration sends catalog names upstream.
func TestPullCatalogFirst(t *testing.T) {
	s, _ := newTestService(t, Offline())
	res, err := s.EnsurePulled(context.Background(), PullRequest{Image: "busybox", Policy: corev1.PullAlways})
	if err != nil || res.Pulled || res.Image.Digest == "" {
		t.Fatalf("busybox Always from the catalog: %+v %v", res, err)
	}
	up, _ := newTestService(t, Offline(), WithRegistries(&registries.Config{Catalog: registries.CatalogUpstream}))
	_, err = up.EnsurePulled(context.Background(), PullRequest{Image: "busybox", Policy: corev1.PullAlways})
	if pe := pullErr(t, err, ReasonErrImagePull); !strings.Contains(pe.Message, "index.docker.io: this node pulls from no registry (offline)") {
		t.Errorf("upstream catalog: %v", pe.Message)
	}
}

func dockerConfigSecret(t *testing.T, name, host string, legacy bool) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte("user:pass"))
	entry := map[string]any{host: map[string]string{"auth": auth}}
	if legacy {
		data, _ := json.Marshal(entry)
		return &corev1.Secret{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: data}}
	}
	data, _ := json.Marshal(map[string]any{"auths": entry})
	return &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: data}}
}

// TestPullCredentials: a private repository answers 401 to an anonymous pull (the
// registry's message in ErrImagePull) and to credentials for another host; the pod's
// dockerconfigjson or dockercfg secret for the registry's host pulls it.
func TestPullCredentials(t *testing.T) {
	tr := newTestRegistry(t)
	tr.private = "private"
	ref := tr.host + "/private/app:1"
	tr.push(t, "private/app:1", testImage(t, goruntime.GOARCH, "secret"))
	secrets := map[string]*corev1.Secret{
		"json":   dockerConfigSecret(t, "json", tr.host, false),
		"legacy": dockerConfigSecret(t, "legacy", "http://"+tr.host+"/private", true),
		"other":  dockerConfigSecret(t, "other", "other.example.com", false),
	}
	get := func(_ context.Context, ns, name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok && ns == "team" {
			return s, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	for _, tc := range []struct {
		secrets []string
		ok      bool
	}{
		{nil, false}, {[]string{"other"}, false}, {[]string{"missing"}, false},
		{[]string{"json"}, true}, {[]string{"missing", "legacy"}, true},
	} {
		s, _ := newTestService(t, WithSecrets(get))
		var refs []corev1.LocalObjectReference
		for _, n := range tc.secrets {
			refs = append(refs, corev1.LocalObjectReference{Name: n})
		}
		_, err := s.EnsurePulled(context.Background(), PullRequest{Image: ref, Namespace: "team", PullSecrets: refs, BackOffKey: "u"})
		if tc.ok && err != nil {
			t.Errorf("secrets %v: %v", tc.secrets, err)
		}
		if !tc.ok {
			if pe := pullErr(t, err, ReasonErrImagePull); !strings.Contains(pe.Message, "UNAUTHORIZED") || !strings.Contains(pe.Message, "not authorized") {
				t.Errorf("secrets %v: message %q lacks the registry's", tc.secrets, pe.Message)
			}
		}
	}
}

// TestPullBackOff: a failed pull is ErrImagePull, then ImagePullBackOff carrying it for
// 10 s, then a new attempt, then 20 s of back-off; per pod and image.
func TestPullBackOff(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	s, _ := newTestService(t, WithClock(clk), Offline())
	req := PullRequest{Image: "example.com/app:1", BackOffKey: "pod-1"}
	ctx := context.Background()
	first := pullErr(t, errOf(s.EnsurePulled(ctx, req)), ReasonErrImagePull)
	bo := pullErr(t, errOf(s.EnsurePulled(ctx, req)), ReasonImagePullBackOff)
	if want := `Back-off pulling image "example.com/app:1": ErrImagePull: ` + first.Message; bo.Message != want {
		t.Errorf("back-off message %q\nwant %q", bo.Message, want)
	}
	other := req
	other.BackOffKey = "pod-2"
	pullErr(t, errOf(s.EnsurePulled(ctx, other)), ReasonErrImagePull)
	clk.Step(11 * time.Second)
	pullErr(t, errOf(s.EnsurePulled(ctx, req)), ReasonErrImagePull)
	clk.Step(11 * time.Second)
	pullErr(t, errOf(s.EnsurePulled(ctx, req)), ReasonImagePullBackOff)
	clk.Step(10 * time.Second)
	pullErr(t, errOf(s.EnsurePulled(ctx, req)), ReasonErrImagePull)
}

func errOf(_ PullResult, err error) error { return err }

// TestPullCoalesced: concurrent pulls of one image by two agents of a host (two
// Services on one store) ask the registry for each blob once, and a third agent's
// later pull fetches no layer again.
func TestPullCoalesced(t *testing.T) {
	tr := newTestRegistry(t)
	ref := tr.host + "/big:1"
	tr.push(t, "big:1", testImage(t, goruntime.GOARCH, "a", "b", "c", "d"))
	// Slow manifests so that the pulls overlap.
	tr.setOverride(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/manifests/") {
			time.Sleep(100 * time.Millisecond)
		}
		return false
	})
	s, store := newTestService(t)
	agents := []*Service{s, New(store, imagebuild.Source{}, WithTransport(loopbackOnly()))}
	blobs, manifests := tr.blobs.Load(), tr.manifests.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := agents[i%2].EnsurePulled(context.Background(), PullRequest{Image: ref, BackOffKey: "u"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if b := tr.blobs.Load() - blobs; b != 5 { // 4 layers and the config
		t.Errorf("6 concurrent pulls by 2 agents fetched %d blobs, want 5", b)
	}
	if m := tr.manifests.Load() - manifests; m != 1 {
		t.Errorf("6 concurrent IfNotPresent pulls by 2 agents asked for the manifest %d times, want once", m)
	}
	third := New(store, imagebuild.Source{}, WithTransport(loopbackOnly()))
	blobs = tr.blobs.Load()
	if _, err := third.EnsurePulled(context.Background(), PullRequest{Image: ref, Policy: corev1.PullAlways, BackOffKey: "u"}); err != nil {
		t.Fatal(err)
	}
	if b := tr.blobs.Load() - blobs; b != 0 {
		t.Errorf("a third agent's pull fetched %d blobs", b)
	}
}

// TestPullBadInput: garbage, lying manifests and a layer that is not a tar fail the
// pull with ErrImagePull naming the fault, and leave no image in the store.
func TestPullBadInput(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		override func(tr *testRegistry, img v1.Image) func(http.ResponseWriter, *http.Request) bool
		img      func(t *testing.T) v1.Image
		want     string
	}{
		{name: "garbage manifest", want: "manifest", override: func(*testRegistry, v1.Image) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.Contains(r.URL.Path, "/manifests/") {
					return false
				}
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				fmt.Fprint(w, "<html>this is not a manifest</html>")
				return true
			}
		}},
		{name: "layer content not its digest", want: "sha256 checksum", override: func(_ *testRegistry, img v1.Image) func(http.ResponseWriter, *http.Request) bool {
			ls, _ := img.Layers()
			d, _ := ls[0].Digest()
			size, _ := ls[0].Size()
			return func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, "/blobs/"+d.String()) {
					return false
				}
				w.Header().Set("Content-Length", fmt.Sprint(size))
				w.Write(bytes.Repeat([]byte{'x'}, int(size)))
				return true
			}
		}},
		{name: "manifest lies about a layer's size", want: "size", img: func(t *testing.T) v1.Image {
			img := testImage(t, goruntime.GOARCH, "sized")
			m, _ := img.Manifest()
			m = m.DeepCopy()
			m.Layers[0].Size += 100
			raw, _ := json.Marshal(m)
			return rawManifestImage{Image: img, raw: raw}
		}},
		{name: "layer is not a tar", want: "tar", img: func(t *testing.T) v1.Image {
			junk := bytes.Repeat([]byte("not a tar archive "), 200)
			l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(junk)), nil })
			if err != nil {
				t.Fatal(err)
			}
			img, err := mutate.AppendLayers(empty.Image, l)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRegistry(t)
			img := testImage(t, goruntime.GOARCH, "good")
			if tc.img != nil {
				img = tc.img(t)
			}
			tr.push(t, "bad:1", img)
			if tc.override != nil {
				tr.setOverride(tc.override(tr, img))
			}
			s, store := newTestService(t)
			ref := tr.host + "/bad:1"
			_, err := s.EnsurePulled(ctx, PullRequest{Image: ref, BackOffKey: "u"})
			if pe := pullErr(t, err, ReasonErrImagePull); !strings.Contains(pe.Message, tc.want) {
				t.Errorf("message %q lacks %q", pe.Message, tc.want)
			}
			if _, err := store.Get(ref); !errors.Is(err, imagestore.ErrNotFound) {
				t.Errorf("store has the image after a failed pull: %v", err)
			}
		})
	}
}

// rawManifestImage is an image whose manifest says what raw says.
type rawManifestImage struct {
	v1.Image
	raw []byte
}

func (r rawManifestImage) RawManifest() ([]byte, error) { return r.raw, nil }
func (r rawManifestImage) Manifest() (*v1.Manifest, error) {
	return v1.ParseManifest(bytes.NewReader(r.raw))
}
func (r rawManifestImage) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(r.raw))
	return h, err
}
func (r rawManifestImage) Size() (int64, error) { return int64(len(r.raw)), nil }

// TestPullMirror: a mirror answers first for its registry; an unreachable mirror falls
// through to the next endpoint, and an unreachable registry fails with ErrImagePull.
func TestPullMirror(t *testing.T) {
	mirror := newTestRegistry(t)
	d := mirror.push(t, "team/app:2", testImage(t, goruntime.GOARCH, "mirrored"))
	cfg, err := registries.Parse([]byte(fmt.Sprintf(`
mirrors:
  registry.invalid:
    endpoint: ["http://127.0.0.1:1", "http://%s"]
  "*":
    endpoint: ["http://127.0.0.1:1"]
`, mirror.host)))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestService(t, WithRegistries(cfg))
	res, err := s.EnsurePulled(context.Background(), PullRequest{Image: "registry.invalid/team/app:2", BackOffKey: "u"})
	if err != nil || res.Image.Digest != d {
		t.Fatalf("pull through the mirror: %+v %v", res, err)
	}
	_, err = s.EnsurePulled(context.Background(), PullRequest{Image: "127.0.0.1:1/app:1", BackOffKey: "u"})
	if pe := pullErr(t, err, ReasonErrImagePull); !strings.Contains(pe.Message, "127.0.0.1:1") {
		t.Errorf("unreachable registry: %q", pe.Message)
	}
}

// TestPullSilentRegistry: a registry that accepts connections and never answers fails
// the pull (ErrImagePull) once the response header wait is over, instead of hanging.
func TestPullSilentRegistry(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	store, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The Service's own transport (only a loopback literal is dialled).
	s := New(store, imagebuild.Source{}, WithTimeouts(time.Second, 200*time.Millisecond))
	_, err = s.EnsurePulled(context.Background(), PullRequest{Image: ln.Addr().String() + "/app:1", BackOffKey: "u"})
	if pe := pullErr(t, err, ReasonErrImagePull); !strings.Contains(pe.Message, "timeout") {
		t.Errorf("message %q does not say it timed out", pe.Message)
	}
}

// TestPullSurvivesSweep: a sweep (image rm, image GC) that runs while a pull has stored
// some of its blobs, not yet named in the index, neither deletes them nor breaks the
// pull: it waits for the pull's image to be whole.
func TestPullSurvivesSweep(t *testing.T) {
	tr := newTestRegistry(t)
	ref := tr.host + "/swept:1"
	tr.push(t, "swept:1", testImage(t, goruntime.GOARCH, "a", "b"))
	fetching, unblock := tr.holdBlobs(t)
	s, store := newTestService(t)
	pulled := make(chan error, 1)
	go func() {
		_, err := s.EnsurePulled(context.Background(), PullRequest{Image: ref, BackOffKey: "u"})
		pulled <- err
	}()
	<-fetching
	swept := make(chan error, 1)
	go func() {
		_, err := store.Sweep(context.Background())
		swept <- err
	}()
	select {
	case err := <-swept:
		t.Fatalf("a sweep ran to its end (err %v) while a pull had unnamed blobs in the store", err)
	case <-time.After(200 * time.Millisecond):
	}
	unblock()
	if err := <-pulled; err != nil {
		t.Fatalf("pull: %v", err)
	}
	if err := <-swept; err != nil {
		t.Fatalf("sweep: %v", err)
	}
	img, err := store.Get(ref)
	if err != nil {
		t.Fatalf("after the sweep: %v", err)
	}
	if _, err := store.Lowers(context.Background(), img); err != nil {
		t.Fatalf("the pulled image is not whole after the sweep: %v", err)
	}
}

// TestPullCallerGivesUp: a caller whose context ends (its pod was deleted) stops
// waiting at once, without a back-off; the pull itself goes on, another caller waiting
// for it gets the image, and the store keeps it.
func TestPullCallerGivesUp(t *testing.T) {
	tr := newTestRegistry(t)
	ref := tr.host + "/slow:1"
	tr.push(t, "slow:1", testImage(t, goruntime.GOARCH, "a", "b"))
	fetching, unblock := tr.holdBlobs(t)
	s, store := newTestService(t)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := s.EnsurePulled(ctx, PullRequest{Image: ref, BackOffKey: "deleted"})
		gaveUp <- err
	}()
	<-fetching
	other := make(chan error, 1)
	go func() {
		_, err := s.EnsurePulled(context.Background(), PullRequest{Image: ref, BackOffKey: "other"})
		other <- err
	}()
	cancel()
	select {
	case err := <-gaveUp:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled caller got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled caller still waits for the pull")
	}
	unblock()
	if err := <-other; err != nil {
		t.Fatalf("the other caller: %v", err)
	}
	if _, err := store.Get(ref); err != nil {
		t.Fatalf("the store lacks the image: %v", err)
	}
	// No back-off was recorded for the caller that gave up.
	if _, err := s.EnsurePulled(context.Background(), PullRequest{Image: ref, Policy: corev1.PullAlways, BackOffKey: "deleted"}); err != nil {
		t.Errorf("a new pull for the caller that gave up: %v", err)
	}
}

// holdBlobs makes the registry hold every blob download until unblock is called (at the
// end of the test at the latest, before the registry's server closes, failure or not);
// fetching is closed when the first one arrives.
func (tr *testRegistry) holdBlobs(t *testing.T) (fetching <-chan struct{}, unblock func()) {
	t.Helper()
	first, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock = sync.OnceFunc(func() { close(resume) })
	t.Cleanup(unblock)
	tr.setOverride(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
			once.Do(func() { close(first) })
			<-resume
		}
		return false
	})
	return first, unblock
}

// TestSharedLayerFetchedOnce: two images sharing a layer, pulled at the same moment by
// two agents of one store, fetch that layer once.
func TestSharedLayerFetchedOnce(t *testing.T) {
	tr := newTestRegistry(t)
	a, b := testImage(t, goruntime.GOARCH, "shared", "only-a"), testImage(t, goruntime.GOARCH, "shared", "only-b")
	tr.push(t, "a:1", a)
	tr.push(t, "b:1", b)
	la, _ := a.Layers()
	lb, _ := b.Layers()
	shared, _ := la[0].Digest()
	if d, _ := lb[0].Digest(); d != shared {
		t.Fatalf("the images do not share their first layer: %s, %s", shared, d)
	}
	// The shared layer is slow, so that both pulls ask for it while the other fetches it.
	var sharedGets atomic.Int64
	tr.setOverride(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+shared.String()) {
			sharedGets.Add(1)
			time.Sleep(300 * time.Millisecond)
		}
		return false
	})
	s, store := newTestService(t)
	other := New(store, imagebuild.Source{}, WithTransport(loopbackOnly()))
	blobs := tr.blobs.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, ref := range []string{"a:1", "b:1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := []*Service{s, other}[i].EnsurePulled(context.Background(), PullRequest{Image: tr.host + "/" + ref, BackOffKey: "u"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := sharedGets.Load(); n != 1 {
		t.Errorf("the shared layer was fetched %d times, want once", n)
	}
	if n := tr.blobs.Load() - blobs; n != 5 { // two configs, the shared layer, one layer each
		t.Errorf("the two pulls fetched %d blobs, want 5", n)
	}
}
