// Package volumes sets up a pod's volumes on the node, as kubelet's volume
// plugins do, and hands the agent one host path per volume to bind-mount
// at each of the volume's mountPaths.
//
// Per-pod volumes live in RootDir/pods/<uid>/volumes/<plugin>/<name> with
// kubelet's plugin directory names (kubernetes.io~empty-dir, ~configmap,
// ~secret, ~downward-api, ~projected). Content volumes (configMap, secret,
// downwardAPI, projected) are written by an atomic writer: a timestamped
// directory switched in with a ..data symlink, so that a live update is
// seen all at once. An emptyDir with medium Memory is a tmpfs mounted in
// the agent's mount namespace, sized by its sizeLimit, as kubelet's.
// Differences from kubelet, both deliberate: secret volumes are plain
// directories on disk, and the sizeLimit of an emptyDir on disk is not
// enforced.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Plugin directory names below RootDir/pods/<uid>/volumes, as kubelet's.
const (
	pluginEmptyDir    = "kubernetes.io~empty-dir"
	pluginConfigMap   = "kubernetes.io~configmap"
	pluginSecret      = "kubernetes.io~secret"
	pluginDownwardAPI = "kubernetes.io~downward-api"
	pluginProjected   = "kubernetes.io~projected"
)

// LocalProvisioner is the provisioner name of tranche's local volumes,
// recorded in a PersistentVolume's pv.kubernetes.io/provisioned-by
// annotation (the localpv controller's name, repeated here because
// components do not import each other).
const LocalProvisioner = "tranche.dev/local"

// annProvisionedBy names the provisioner that created a PersistentVolume.
const annProvisionedBy = "pv.kubernetes.io/provisioned-by"

// Config is what New needs.
type Config struct {
	// Client reads ConfigMaps, Secrets, PVCs, PVs and the node, and
	// requests service account tokens.
	Client kubernetes.Interface
	// RootDir holds the per-pod directories: RootDir/pods/<uid>/volumes.
	RootDir string
	// PVRoot is where tranche's local PersistentVolumes live, one
	// directory per PV name.
	PVRoot string
	// NodeName is this node, read for its allocatable resources when a
	// downward API item asks for a limit a container does not set.
	NodeName string
	// Clock decides token refreshes and names payload generations; nil
	// means the real clock.
	Clock clock.Clock
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Mounter mounts the tmpfs of emptyDirs with medium Memory; nil means
	// HostMounter.
	Mounter Mounter
}

// Manager sets up, refreshes and removes pods' volumes. It is safe for
// concurrent use; calls for one pod are serialised.
type Manager struct {
	client   kubernetes.Interface
	rootDir  string
	pvRoot   string
	nodeName string
	clock    clock.Clock
	log      *slog.Logger
	mounter  Mounter

	mu sync.Mutex
	// pods holds the last pod given to Prepare, by UID, for Refresh.
	pods map[types.UID]*v1.Pod
	// locks serialise the file work on one pod between Prepare, Refresh
	// and Cleanup.
	locks map[types.UID]*sync.Mutex
	// tokens caches service account tokens until they need a refresh.
	tokens map[tokenKey]*authenticationv1.TokenRequest
	// podCerts holds podCertificate projections' keys and certificates (podcert.go).
	podCerts podCertCache
}

// New returns a Manager for cfg.
func New(cfg Config) *Manager {
	m := &Manager{
		client: cfg.Client, rootDir: cfg.RootDir, pvRoot: cfg.PVRoot, nodeName: cfg.NodeName,
		clock: cfg.Clock, log: cfg.Logger, mounter: cfg.Mounter,
		pods:   map[types.UID]*v1.Pod{},
		locks:  map[types.UID]*sync.Mutex{},
		tokens: map[tokenKey]*authenticationv1.TokenRequest{},
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.mounter == nil {
		m.mounter = HostMounter{}
	}
	return m
}

// Prepare sets up every volume of pod and returns, for each volume name,
// the host directory (or, for a hostPath file or socket, the file) to
// bind-mount at the volume's mountPaths. It is idempotent and meant to be
// called on every sync of the pod: content volumes are rewritten only when
// their content changed, and the pod is remembered for Refresh.
//
// pod is the pod as the agent runs it, with the ServiceAccountVolume
// already added. When some volumes cannot be set up the map holds those
// that are ready and the error joins one *MountError per failing volume;
// the pod must then not start, and the agent records each as a FailedMount
// event and retries on its next sync.
func (m *Manager) Prepare(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	if pod == nil {
		return nil, errors.New("preparing volumes: nil pod")
	}
	unlock := m.lockPod(pod.UID)
	defer unlock()
	m.mu.Lock()
	m.pods[pod.UID] = pod.DeepCopy()
	m.mu.Unlock()

	env := &podEnv{m: m, pod: pod}
	paths := make(map[string]string, len(pod.Spec.Volumes))
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		p, err := m.setUp(ctx, env, vol)
		if err != nil {
			errs = append(errs, &MountError{Volume: vol.Name, Err: err})
			continue
		}
		paths[vol.Name] = p
	}
	return paths, errors.Join(errs...)
}

// Refresh rewrites the configMap, secret, downwardAPI and projected
// volumes of every pod prepared and not cleaned up, so that changed
// ConfigMaps and Secrets and expiring tokens reach running containers. The
// agent calls it periodically (kubelet resyncs every minute); a token is
// renewed once 80% of its lifetime has passed. Failures are logged and
// returned joined; the previous content then stays in place.
func (m *Manager) Refresh(ctx context.Context) error {
	m.mu.Lock()
	pods := make([]*v1.Pod, 0, len(m.pods))
	for _, p := range m.pods {
		pods = append(pods, p)
	}
	m.mu.Unlock()

	var errs []error
	for _, pod := range pods {
		if err := ctx.Err(); err != nil {
			return err
		}
		errs = append(errs, m.refreshPod(ctx, pod))
	}
	return errors.Join(errs...)
}

// refreshPod rewrites one pod's content volumes.
func (m *Manager) refreshPod(ctx context.Context, pod *v1.Pod) error {
	unlock := m.lockPod(pod.UID)
	defer unlock()
	m.mu.Lock()
	_, live := m.pods[pod.UID]
	m.mu.Unlock()
	if !live {
		return nil
	}
	env := &podEnv{m: m, pod: pod}
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.ConfigMap == nil && vol.Secret == nil && vol.DownwardAPI == nil && vol.Projected == nil {
			continue
		}
		if _, err := m.setUp(ctx, env, vol); err != nil {
			m.log.Warn("refreshing volume failed", "pod", pod.Namespace+"/"+pod.Name, "volume", vol.Name, "err", err)
			errs = append(errs, fmt.Errorf("refreshing volume %q of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Cleanup forgets pod and removes its volume directories with their
// content (emptyDir data included). hostPath and persistentVolumeClaim
// data are outside them and stay. The agent calls it once the pod's
// processes are gone and its bind mounts are undone.
func (m *Manager) Cleanup(_ context.Context, pod *v1.Pod) error {
	if pod == nil {
		return errors.New("cleaning up volumes: nil pod")
	}
	unlock := m.lockPod(pod.UID)
	m.mu.Lock()
	delete(m.pods, pod.UID)
	for k := range m.tokens {
		if k.pod == pod.UID {
			delete(m.tokens, k)
		}
	}
	m.mu.Unlock()
	m.podCerts.forget(pod.UID)
	vols := filepath.Join(m.rootDir, "pods", string(pod.UID), "volumes")
	err := errors.Join(m.unmountEmptyDirs(vols), m.unmountImages(vols))
	if err == nil {
		err = os.RemoveAll(vols)
	}
	unlock()

	m.mu.Lock()
	delete(m.locks, pod.UID)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("removing volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// lockPod takes the pod's lock and returns its release.
func (m *Manager) lockPod(uid types.UID) func() {
	m.mu.Lock()
	l, ok := m.locks[uid]
	if !ok {
		l = &sync.Mutex{}
		m.locks[uid] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// volumeDir is the per-pod directory of a volume.
func (m *Manager) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.rootDir, "pods", string(uid), "volumes", plugin, name)
}

// podEnv carries what the volumes of one Prepare share: the pod and the
// node's allocatable resources, read at most once and only when needed.
type podEnv struct {
	m           *Manager
	pod         *v1.Pod
	allocatable v1.ResourceList
	read        bool
}

// nodeAllocatable reads the node's allocatable resources.
func (e *podEnv) nodeAllocatable(ctx context.Context) func() (v1.ResourceList, error) {
	return func() (v1.ResourceList, error) {
		if e.read {
			return e.allocatable, nil
		}
		node, err := e.m.client.CoreV1().Nodes().Get(ctx, e.m.nodeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading node %s for its allocatable resources: %w", e.m.nodeName, err)
		}
		e.allocatable, e.read = node.Status.Allocatable, true
		return e.allocatable, nil
	}
}

// setUp makes one volume ready and returns its host path.
func (m *Manager) setUp(ctx context.Context, env *podEnv, vol *v1.Volume) (string, error) {
	pod := env.pod
	switch {
	case vol.EmptyDir != nil:
		return m.setUpEmptyDir(pod, vol)
	case vol.HostPath != nil:
		if err := checkHostPath(vol.HostPath.Path, vol.HostPath.Type); err != nil {
			return "", err
		}
		return vol.HostPath.Path, nil
	case vol.ConfigMap != nil:
		src := vol.ConfigMap
		cm, err := m.getConfigMap(ctx, pod.Namespace, src.Name)
		if err != nil {
			return "", err
		}
		files, err := configMapFiles(src.Name, src.Items, ptr.Deref(src.Optional, false), cm, modeOr(src.DefaultMode))
		if err != nil {
			return "", err
		}
		return m.write(pod, pluginConfigMap, vol.Name, files)
	case vol.Secret != nil:
		src := vol.Secret
		s, err := m.getSecret(ctx, pod.Namespace, src.SecretName)
		if err != nil {
			return "", err
		}
		files, err := secretFiles(src.SecretName, src.Items, ptr.Deref(src.Optional, false), s, modeOr(src.DefaultMode))
		if err != nil {
			return "", err
		}
		return m.write(pod, pluginSecret, vol.Name, files)
	case vol.DownwardAPI != nil:
		files, err := downwardFiles(vol.DownwardAPI.Items, modeOr(vol.DownwardAPI.DefaultMode), pod, env.nodeAllocatable(ctx))
		if err != nil {
			return "", err
		}
		return m.write(pod, pluginDownwardAPI, vol.Name, files)
	case vol.Projected != nil:
		files, err := m.projectedFiles(ctx, env, vol.Projected)
		if err != nil {
			return "", err
		}
		return m.write(pod, pluginProjected, vol.Name, files)
	case vol.PersistentVolumeClaim != nil:
		return m.claimPath(ctx, pod.Namespace, vol.PersistentVolumeClaim.ClaimName)
	case vol.Image != nil:
		return m.setUpImage(pod, vol)
	}
	return "", errors.New("volume type not supported by tranche: use emptyDir, hostPath, configMap, secret, downwardAPI, projected, persistentVolumeClaim or image")
}

// setUpEmptyDir creates an emptyDir's directory, world-writable as
// kubelet makes it, and for medium Memory mounts a tmpfs on it.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, vol *v1.Volume) (string, error) {
	dir := m.volumeDir(pod.UID, pluginEmptyDir, vol.Name)
	memory := vol.EmptyDir.Medium == v1.StorageMediumMemory
	if _, err := os.Stat(dir); err != nil {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", fmt.Errorf("creating emptyDir %s: %w", dir, err)
		}
		// MkdirAll's mode is filtered by the umask; kubelet's is not.
		if err := os.Chmod(dir, 0o777); err != nil {
			return "", fmt.Errorf("setting mode of emptyDir %s: %w", dir, err)
		}
		if vol.EmptyDir.SizeLimit != nil && !memory {
			m.log.Info("emptyDir sizeLimit on disk is not enforced", "pod", pod.Namespace+"/"+pod.Name, "volume", vol.Name, "sizeLimit", vol.EmptyDir.SizeLimit.String())
		}
	}
	if memory {
		var limit int64
		if vol.EmptyDir.SizeLimit != nil {
			limit = vol.EmptyDir.SizeLimit.Value()
		}
		if err := m.mountMemoryMedium(dir, limit); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// write puts files into the volume's directory with the atomic writer.
func (m *Manager) write(pod *v1.Pod, plugin, name string, files map[string]fileProjection) (string, error) {
	dir := m.volumeDir(pod.UID, plugin, name)
	changed, err := writeAtomic(dir, files, m.clock.Now())
	if err != nil {
		return "", err
	}
	if changed {
		m.log.Debug("volume content written", "pod", pod.Namespace+"/"+pod.Name, "volume", name, "files", len(files))
	}
	return dir, nil
}

// getConfigMap reads a ConfigMap; a missing one is nil without error.
func (m *Manager) getConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	cm, err := m.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading configmap %s/%s: %w", ns, name, err)
	}
	return cm, nil
}

// getSecret reads a Secret; a missing one is nil without error.
func (m *Manager) getSecret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	s, err := m.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", ns, name, err)
	}
	return s, nil
}

// projectedFiles merges the files of a projected volume's sources. As in
// kubelet, every source is tried and the failures are reported together.
func (m *Manager) projectedFiles(ctx context.Context, env *podEnv, src *v1.ProjectedVolumeSource) (map[string]fileProjection, error) {
	pod := env.pod
	mode := modeOr(src.DefaultMode)
	out := map[string]fileProjection{}
	var errs []error
	add := func(files map[string]fileProjection, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		for p, f := range files {
			out[p] = f
		}
	}
	for _, s := range src.Sources {
		switch {
		case s.ConfigMap != nil:
			cm, err := m.getConfigMap(ctx, pod.Namespace, s.ConfigMap.Name)
			if err != nil {
				add(nil, err)
				continue
			}
			add(configMapFiles(s.ConfigMap.Name, s.ConfigMap.Items, ptr.Deref(s.ConfigMap.Optional, false), cm, mode))
		case s.Secret != nil:
			sec, err := m.getSecret(ctx, pod.Namespace, s.Secret.Name)
			if err != nil {
				add(nil, err)
				continue
			}
			add(secretFiles(s.Secret.Name, s.Secret.Items, ptr.Deref(s.Secret.Optional, false), sec, mode))
		case s.DownwardAPI != nil:
			add(downwardFiles(s.DownwardAPI.Items, mode, pod, env.nodeAllocatable(ctx)))
		case s.ServiceAccountToken != nil:
			tok, err := m.token(ctx, pod, s.ServiceAccountToken)
			if err != nil {
				add(nil, err)
				continue
			}
			add(map[string]fileProjection{s.ServiceAccountToken.Path: {Data: []byte(tok), Mode: mode}}, nil)
		case s.ClusterTrustBundle != nil:
			add(m.clusterTrustBundleFiles(ctx, s.ClusterTrustBundle, mode))
		case s.PodCertificate != nil:
			add(m.podCertificateFiles(ctx, pod, s.PodCertificate, mode))
		}
	}
	switch len(errs) {
	case 0:
		return out, nil
	case 1:
		// Unwrapped, so that apierrors.IsNotFound still sees it.
		return nil, errs[0]
	}
	return nil, utilerrors.NewAggregate(errs)
}

// token returns a service account token bound to pod for the projection,
// from the cache while it is fresh, else through the TokenRequest API.
func (m *Manager) token(ctx context.Context, pod *v1.Pod, p *v1.ServiceAccountTokenProjection) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	seconds := ptr.Deref(p.ExpirationSeconds, defaultTokenSeconds)
	key := tokenKey{pod: pod.UID, serviceAccount: sa, audience: p.Audience, seconds: seconds}
	now := m.clock.Now()
	m.mu.Lock()
	cached := m.tokens[key]
	m.mu.Unlock()
	if cached != nil && !needsRefresh(cached, now) {
		return cached.Status.Token, nil
	}

	audiences := []string{}
	if p.Audience != "" {
		audiences = []string{p.Audience}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: ptr.To(seconds),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	tr, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		if cached != nil && now.Before(cached.Status.ExpirationTimestamp.Time) {
			// kubelet keeps serving a token that is still valid when
			// renewal fails; the next refresh tries again.
			m.log.Warn("renewing service account token failed; keeping the current one",
				"pod", pod.Namespace+"/"+pod.Name, "serviceAccount", sa, "err", err)
			return cached.Status.Token, nil
		}
		return "", fmt.Errorf("requesting a token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = ptr.To(seconds)
	}
	m.mu.Lock()
	m.tokens[key] = tr
	m.mu.Unlock()
	return tr.Status.Token, nil
}

// claimPath resolves a persistentVolumeClaim volume to its data directory:
// the claim must be Bound to a PV that names it. A PV of tranche's local
// provisioner lives at PVRoot/<pv name> (created if missing, so that a
// node sees it whatever the provisioner's own root); other hostPath and
// local PVs use their path.
func (m *Manager) claimPath(ctx context.Context, ns, name string) (string, error) {
	pvc, err := m.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", apierrors.NewNotFound(v1.Resource("persistentvolumeclaim"), name)
	}
	if err != nil {
		return "", fmt.Errorf("reading persistentvolumeclaim %s/%s: %w", ns, name, err)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("persistentvolumeclaim %q is not bound", name)
	}
	pv, err := m.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", apierrors.NewNotFound(v1.Resource("persistentvolume"), pvc.Spec.VolumeName)
	}
	if err != nil {
		return "", fmt.Errorf("reading persistentvolume %s: %w", pvc.Spec.VolumeName, err)
	}
	return m.volumePath(pv, pvc)
}

// volumePath returns the directory of a PV bound to pvc.
func (m *Manager) volumePath(pv *v1.PersistentVolume, pvc *v1.PersistentVolumeClaim) (string, error) {
	if pv.Spec.ClaimRef == nil {
		return "", fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", pv.Name)
	}
	if pv.Spec.ClaimRef.UID != pvc.UID {
		return "", fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID (%s) does not point to claim.UID (%s)", pv.Name, pv.Spec.ClaimRef.UID, pvc.UID)
	}
	switch {
	case pv.Annotations[annProvisionedBy] == LocalProvisioner && m.pvRoot != "":
		dir := filepath.Join(m.pvRoot, pv.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", fmt.Errorf("creating directory of persistentvolume %s: %w", pv.Name, err)
		}
		return dir, nil
	case pv.Spec.HostPath != nil:
		if err := checkHostPath(pv.Spec.HostPath.Path, pv.Spec.HostPath.Type); err != nil {
			return "", err
		}
		return pv.Spec.HostPath.Path, nil
	case pv.Spec.Local != nil:
		info, err := os.Stat(pv.Spec.Local.Path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("checking local persistentvolume %s: %w", pv.Name, err)
		}
		if err != nil {
			return "", fmt.Errorf("path %q does not exist", pv.Spec.Local.Path)
		}
		if !info.IsDir() {
			return "", fmt.Errorf("local persistentvolume %s: %s is not a directory", pv.Name, pv.Spec.Local.Path)
		}
		return pv.Spec.Local.Path, nil
	}
	return "", fmt.Errorf("persistentvolume %s has no hostPath or local source, which is all tranche can mount", pv.Name)
}
