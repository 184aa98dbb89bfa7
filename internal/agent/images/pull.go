package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/credentialprovider"
	credsecrets "k8s.io/kubernetes/pkg/credentialprovider/secrets"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
	"github.com/tranche/tranche/internal/registries"
)

// Kubelet's image pull back-off (imageBackOffPeriod and MaxImageBackOff), per pod and
// image.
const (
	PullBackOffInitial = 10 * time.Second
	PullBackOffMax     = 300 * time.Second
)

// Bounds of talking to a registry (per request; a request is retried once): an
// unreachable or silent registry fails the pull within them and the pod backs off.
const (
	DefaultDialTimeout   = 10 * time.Second
	DefaultHeaderTimeout = 30 * time.Second
	parallelLayers       = 3 // containerd's max_concurrent_downloads
)

// Reasons of a PullError: the container's waiting reason, as kubelet words it.
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
)

// PullError is a container image that could not be had: Reason is kubelet's waiting
// reason and Message its waiting message.
type PullError struct {
	Reason  string
	Message string
	Err     error
}

func (e *PullError) Error() string { return e.Message }
func (e *PullError) Unwrap() error { return e.Err }

// SecretGetter reads a pod's pull secret; a missing secret is an error for which
// apierrors.IsNotFound holds, or (nil, nil).
type SecretGetter func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// Option configures a Service.
type Option func(*Service)

// WithRegistries sets the registries configuration (mirrors, TLS, credentials, and
// whether the catalog answers first).
func WithRegistries(c *registries.Config) Option {
	return func(s *Service) {
		if c != nil {
			s.reg = c
		}
	}
}

// WithSecrets sets how pull secrets are read; without it, pods' imagePullSecrets are
// ignored.
func WithSecrets(get SecretGetter) Option { return func(s *Service) { s.secrets = get } }

// WithTransport sets the HTTP transport to registries instead of one per host built
// from the registries configuration (tests).
func WithTransport(rt http.RoundTripper) Option { return func(s *Service) { s.baseTransport = rt } }

// Offline makes every pull fail without any network traffic (tests, air-gapped
// nodes): the catalog and the store still answer.
func Offline() Option { return WithTransport(offlineTransport{}) }

type offlineTransport struct{}

func (offlineTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("%s: this node pulls from no registry (offline)", r.URL.Host)
}

// WithTimeouts bounds connecting (and the TLS handshake) and waiting for a response
// header, per request to a registry (DefaultDialTimeout, DefaultHeaderTimeout).
func WithTimeouts(dial, header time.Duration) Option {
	return func(s *Service) { s.dialTimeout, s.headerTimeout = dial, header }
}

// WithClock sets the clock of the pull back-off and durations.
func WithClock(c clock.Clock) Option { return func(s *Service) { s.clock = c } }

// PullRequest is one container's image as kubelet's image manager sees it.
type PullRequest struct {
	// Image is the reference as the pod spec writes it.
	Image string
	// Policy is the container's imagePullPolicy; "" means the API server's default
	// (Always for ":latest" or no tag, else IfNotPresent).
	Policy corev1.PullPolicy
	// Namespace and PullSecrets are the pod's namespace and imagePullSecrets (the
	// ServiceAccount's were added by admission).
	Namespace   string
	PullSecrets []corev1.LocalObjectReference
	// BackOffKey identifies the pod (its UID): the back-off is per pod and image.
	BackOffKey string
	// OnPull is called when a registry is about to be asked (kubelet's Pulling event).
	OnPull func()
}

// PullResult is what EnsurePulled did.
type PullResult struct {
	Image imagestore.Image
	// Pulled is true when a registry was asked (kubelet's "Successfully pulled"),
	// false when the image was present (or is the catalog's).
	Pulled bool
	// PullDuration is the pull itself; Total includes waiting for another pull of the
	// same image.
	PullDuration, Total time.Duration
}

// pullCall is one pull in flight, which callers with the same image and credentials
// share.
type pullCall struct {
	done     chan struct{}
	img      imagestore.Image
	duration time.Duration
	err      error
}

// puller is the registry half of a Service.
type puller struct {
	reg           *registries.Config
	secrets       SecretGetter
	baseTransport http.RoundTripper
	clock         clock.Clock
	platform      v1.Platform
	dialTimeout   time.Duration
	headerTimeout time.Duration

	backoff    *flowcontrol.Backoff
	prevErr    sync.Map // back-off key -> "ErrImagePull: message"
	fetched    atomic.Int64
	pmu        sync.Mutex
	pulls      map[string]*pullCall
	tmu        sync.Mutex
	transports map[string]http.RoundTripper
}

func (s *Service) initPuller() {
	if s.reg == nil {
		s.reg = &registries.Config{}
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.dialTimeout <= 0 {
		s.dialTimeout = DefaultDialTimeout
	}
	if s.headerTimeout <= 0 {
		s.headerTimeout = DefaultHeaderTimeout
	}
	s.platform = v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}
	// kubelet's flowcontrol back-off, on s.clock (the "Fake" constructor is the one
	// that takes a clock).
	s.backoff = flowcontrol.NewFakeBackOff(PullBackOffInitial, PullBackOffMax, s.clock)
	s.pulls = map[string]*pullCall{}
	s.transports = map[string]http.RoundTripper{}
}

// Fetched is the number of bytes received from registries so far.
func (s *Service) Fetched() int64 { return s.fetched.Load() }

// DefaultPolicy is the API server's default imagePullPolicy for ref: Always for
// ":latest" or no tag, IfNotPresent otherwise (a digest included).
func DefaultPolicy(ref string) corev1.PullPolicy {
	if strings.Contains(ref, "@") {
		return corev1.PullIfNotPresent
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(last, ":"); i < 0 || last[i+1:] == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// EnsurePulled gives a container its image as kubelet's image manager does: the
// catalog's build for a catalog name (unless the registries configuration sends those
// upstream), else per pull policy the stored image or a pull from the image's
// registry (mirrors first) with the pod's pull secrets matched by registry as
// kubelet's keyring matches them, anonymous when none matches. Errors are an
// *InvalidNameError, a *PullError (ErrImageNeverPull, ErrImagePull, and
// ImagePullBackOff while a failed pull of this pod and image backs off: 10 s doubling
// to 5 min), or a store fault.
func (s *Service) EnsurePulled(ctx context.Context, req PullRequest) (PullResult, error) {
	norm, err := imagestore.Normalize(req.Image)
	if err != nil {
		return PullResult{}, &InvalidNameError{Err: err}
	}
	if !s.reg.UpstreamCatalog() {
		if _, ok := imagebuild.Match(norm); ok {
			img, err := s.Ensure(ctx, req.Image)
			return PullResult{Image: img}, err
		}
	}
	policy := req.Policy
	if policy == "" {
		policy = DefaultPolicy(req.Image)
	}
	stored, err := s.store.Get(norm)
	present := err == nil
	if err != nil && !errors.Is(err, imagestore.ErrNotFound) {
		return PullResult{}, err
	}
	switch {
	case policy == corev1.PullNever && !present:
		return PullResult{}, &PullError{Reason: ReasonErrImageNeverPull,
			Message: fmt.Sprintf("Container image %q is not present with pull policy of Never", req.Image)}
	case policy == corev1.PullNever, policy == corev1.PullIfNotPresent && present:
		return PullResult{Image: stored}, nil
	}

	key := req.BackOffKey + "_" + req.Image
	if s.backoff.IsInBackOffSinceUpdate(key, s.clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", req.Image)
		if prev, ok := s.prevErr.Load(key); ok {
			msg += ": " + prev.(string)
		}
		return PullResult{}, &PullError{Reason: ReasonImagePullBackOff, Message: msg}
	}
	s.prevErr.Delete(key)
	if req.OnPull != nil {
		req.OnPull()
	}
	start := s.clock.Now()
	creds, err := s.credentials(ctx, req, norm)
	if err != nil {
		return PullResult{}, err
	}
	img, d, err := s.pullShared(ctx, norm, creds, policy == corev1.PullAlways)
	if err != nil && ctx.Err() != nil {
		// The caller gave up (its pod is being deleted): not a failed pull.
		return PullResult{}, ctx.Err()
	}
	if err != nil {
		s.backoff.Next(key, s.clock.Now())
		s.prevErr.Store(key, ReasonErrImagePull+": "+err.Error())
		return PullResult{}, &PullError{Reason: ReasonErrImagePull, Message: err.Error(), Err: err}
	}
	s.backoff.GC()
	return PullResult{Image: img, Pulled: true, PullDuration: d, Total: s.clock.Since(start)}, nil
}

// credentials are the pod's pull secrets' credentials for norm's repository, in
// kubelet's order (most specific match first); nil means anonymous. A secret that
// cannot be read is skipped, as kubelet does.
func (s *Service) credentials(ctx context.Context, req PullRequest, norm string) ([]authn.AuthConfig, error) {
	if s.secrets == nil || len(req.PullSecrets) == 0 {
		return nil, nil
	}
	var secrets []corev1.Secret
	for _, ref := range req.PullSecrets {
		sec, err := s.secrets(ctx, req.Namespace, ref.Name)
		if err != nil || sec == nil {
			continue
		}
		secrets = append(secrets, *sec)
	}
	keyring, err := credsecrets.MakeDockerKeyring(secrets, &credentialprovider.BasicDockerKeyring{})
	if err != nil {
		return nil, &PullError{Reason: ReasonErrImagePull, Message: fmt.Sprintf("reading the pod's imagePullSecrets: %v", err), Err: err}
	}
	found, ok := keyring.Lookup(repositoryOf(norm))
	if !ok {
		return nil, nil
	}
	out := make([]authn.AuthConfig, 0, len(found))
	for _, c := range found {
		out = append(out, authn.AuthConfig{Username: c.Username, Password: c.Password, Auth: c.Auth,
			IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken})
	}
	return out, nil
}

// pullShared coalesces pulls of one image with the same credentials in this process,
// and between the processes of the host through the store's lock on the image: unless
// always, an image another agent stored meanwhile is taken as it is. The pull itself
// does not end with its callers' contexts (its requests are bounded by the transport's
// timeouts): a caller whose context ends (its pod was deleted) stops waiting at once,
// and the others, and the store, still get the image.
func (s *Service) pullShared(ctx context.Context, norm string, creds []authn.AuthConfig, always bool) (imagestore.Image, time.Duration, error) {
	key := fmt.Sprint(norm, "\x00", always, "\x00", creds)
	s.pmu.Lock()
	c, ok := s.pulls[key]
	if !ok {
		c = &pullCall{done: make(chan struct{})}
		s.pulls[key] = c
		go s.runPull(context.WithoutCancel(ctx), key, c, norm, creds, always)
	}
	s.pmu.Unlock()
	select {
	case <-c.done:
		return c.img, c.duration, c.err
	case <-ctx.Done():
		return imagestore.Image{}, 0, ctx.Err()
	}
}

// runPull is the one pull of key that pullShared's callers wait for.
func (s *Service) runPull(ctx context.Context, key string, c *pullCall, norm string, creds []authn.AuthConfig, always bool) {
	defer func() {
		s.pmu.Lock()
		delete(s.pulls, key)
		s.pmu.Unlock()
		close(c.done)
	}()
	unlock, err := s.store.Lock(ctx, "pull "+norm)
	if err != nil {
		c.err = err
		return
	}
	defer unlock()
	start := s.clock.Now()
	if !always {
		if img, err := s.store.Get(norm); err == nil {
			c.img = img
			return
		}
	}
	c.img, c.err = s.pullCreds(ctx, norm, creds)
	c.duration = s.clock.Since(start)
}

// pullCreds tries each credential in turn, as kubelet does, and returns the last error.
func (s *Service) pullCreds(ctx context.Context, norm string, creds []authn.AuthConfig) (imagestore.Image, error) {
	if len(creds) == 0 {
		return s.pullEndpoints(ctx, norm, nil)
	}
	var err error
	for i := range creds {
		var img imagestore.Image
		if img, err = s.pullEndpoints(ctx, norm, &creds[i]); err == nil {
			return img, nil
		}
	}
	return imagestore.Image{}, err
}

// pullEndpoints pulls norm from its registry's mirrors, then the registry itself.
// The pod's credentials go to the registry itself; a host's auth in the registries
// configuration goes to that host and wins.
func (s *Service) pullEndpoints(ctx context.Context, norm string, cred *authn.AuthConfig) (imagestore.Image, error) {
	ref, err := name.ParseReference(norm)
	if err != nil {
		return imagestore.Image{}, &InvalidNameError{Err: err}
	}
	registry := ref.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	var errs []string
	for _, ep := range s.reg.Endpoints(registry) {
		img, err := s.pullFrom(ctx, norm, ref, ep, cred)
		if err == nil {
			return img, nil
		}
		if ctx.Err() != nil {
			return imagestore.Image{}, err
		}
		if ep.Mirror {
			errs = append(errs, fmt.Sprintf("mirror %s: %v", ep.Host, err))
			continue
		}
		if len(errs) > 0 {
			return imagestore.Image{}, fmt.Errorf("%w (after %s)", err, strings.Join(errs, "; "))
		}
		return imagestore.Image{}, err
	}
	return imagestore.Image{}, errors.New("no endpoint")
}

// pullFrom pulls norm from one endpoint: the manifest (an index resolved to the
// node's platform), the config, the missing layers several at a time, each verified
// against its digest and size while stored and unpacked as soon as it is there
// (diffID verified, tar checked), then the manifest; only then is the image named in
// the store, so a failed pull leaves no image behind.
func (s *Service) pullFrom(ctx context.Context, norm string, ref name.Reference, ep registries.Endpoint, cred *authn.AuthConfig) (imagestore.Image, error) {
	fail := func(err error) (imagestore.Image, error) {
		return imagestore.Image{}, fmt.Errorf("failed to pull and unpack image %q: %w", norm, err)
	}
	host := ep.Host
	if host == "docker.io" {
		host = name.DefaultRegistry
	}
	var nameOpts []name.Option
	if ep.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	id := ":" + ref.Identifier()
	if _, ok := ref.(name.Digest); ok {
		id = "@" + ref.Identifier()
	}
	epRef, err := name.ParseReference(host+"/"+ref.Context().RepositoryStr()+id, nameOpts...)
	if err != nil {
		return fail(err)
	}
	auth := authn.Anonymous
	if cred != nil && !ep.Mirror {
		auth = authn.FromConfig(*cred)
	}
	if hc, ok := s.reg.Host(ep.Host); ok && hc.Auth != nil {
		u, p, tok := hc.Auth.Credentials()
		auth = authn.FromConfig(authn.AuthConfig{Username: u, Password: p, IdentityToken: tok})
	}
	rt, err := s.transport(ep.Host)
	if err != nil {
		return fail(err)
	}
	desc, err := remote.Get(epRef, remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(rt),
		remote.WithPlatform(s.platform), remote.WithRetryBackoff(remote.Backoff{Duration: time.Second, Factor: 2, Steps: 2}))
	if err != nil {
		return fail(fmt.Errorf("failed to resolve reference %q: %w", norm, err))
	}
	img, err := desc.Image()
	if err != nil {
		return fail(fmt.Errorf("manifest: %w", err))
	}
	digest, err := img.Digest()
	if err != nil {
		return fail(fmt.Errorf("manifest: %w", err))
	}
	manifest, err := img.Manifest()
	if err != nil {
		return fail(fmt.Errorf("manifest: %w", err))
	}
	// Until Put names the image, its blobs and layers are referenced by no index entry:
	// hold the store's content so that no concurrent sweep (image rm, GC) deletes them.
	release, err := s.store.HoldContent(ctx)
	if err != nil {
		return fail(err)
	}
	defer release()
	// The config first (its diffIDs check the layers), from the store when it is there.
	var rawConfig []byte
	if s.store.HasBlob(manifest.Config.Digest, manifest.Config.Size) {
		rawConfig, err = s.store.ReadBlob(manifest.Config.Digest)
	} else if rawConfig, err = img.RawConfigFile(); err == nil {
		err = s.store.PutBlob(ctx, manifest.Config.Digest, manifest.Config.Size, bytes.NewReader(rawConfig))
	}
	if err != nil {
		return fail(fmt.Errorf("config: %w", err))
	}
	config, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return fail(fmt.Errorf("config: %w", err))
	}
	if len(config.RootFS.DiffIDs) != len(manifest.Layers) {
		return fail(fmt.Errorf("the manifest lists %d layers but the config %d diffIDs", len(manifest.Layers), len(config.RootFS.DiffIDs)))
	}
	// Each layer is unpacked as soon as it is stored, beside the other downloads.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelLayers)
	for i, l := range manifest.Layers {
		g.Go(func() error {
			if err := s.store.PutLayer(gctx, img, l); err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
			return s.store.UnpackLayer(gctx, l, config.RootFS.DiffIDs[i], norm)
		})
	}
	if err := g.Wait(); err != nil {
		return fail(err)
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return fail(fmt.Errorf("manifest: %w", err))
	}
	if err := s.store.PutBlob(ctx, digest, int64(len(rawManifest)), bytes.NewReader(rawManifest)); err != nil {
		return fail(fmt.Errorf("manifest: %w", err))
	}
	local, err := s.store.BlobImage(digest)
	if err != nil {
		return fail(err)
	}
	stored, err := s.store.Put(ctx, local, norm)
	if err != nil {
		return fail(err)
	}
	return stored, nil
}

// transport returns the HTTP transport to host: the registries configuration's TLS
// settings for it, bounded dials and waits, and a count of the bytes received.
func (s *Service) transport(host string) (http.RoundTripper, error) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if rt, ok := s.transports[host]; ok {
		return rt, nil
	}
	base := s.baseTransport
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: s.dialTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = s.dialTimeout
		t.ResponseHeaderTimeout = s.headerTimeout
		t.MaxIdleConnsPerHost = parallelLayers + 1
		if hc, ok := s.reg.Host(host); ok && hc.TLS != nil {
			cfg, err := hc.TLS.Config()
			if err != nil {
				return nil, fmt.Errorf("configs.%q.tls.%w", host, err)
			}
			t.TLSClientConfig = cfg
		}
		base = t
	}
	rt := countingTransport{base: base, n: &s.fetched}
	s.transports[host] = rt
	return rt, nil
}

// countingTransport counts the bytes of response bodies.
type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = countingBody{ReadCloser: resp.Body, n: c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// repositoryOf is a normalised name without its tag or digest, what kubelet's keyring
// is asked about ("docker.io/library/busybox").
func repositoryOf(norm string) string {
	if i := strings.LastIndex(norm, "@"); i >= 0 {
		return norm[:i]
	}
	if i := strings.LastIndex(norm, ":"); i > strings.LastIndex(norm, "/") {
		return norm[:i]
	}
	return norm
}
