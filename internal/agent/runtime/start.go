package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	crv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/agent/ocispec"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
)

// Starting a container instance is three steps: gather (what the pod, the API and
// the image store say: the environment, the image, the volumes' sources), plan (a pure
// function of those: the OCI spec, its mounts, the paths of the bundle and logs, the
// shim request) and apply (the I/O, through the Runner: the root file system, the
// bundle, the process). start in container.go strings them together.

// planInput is everything the plan of one container instance depends on.
type planInput struct {
	pod *v1.Pod
	// container is the pod's container as given; its command and arguments are
	// expanded with env by the plan.
	container *v1.Container
	env       []string
	image     crv1.Config
	// id is the instance's container id; restartCount the instance's (what the
	// status will say once it runs), which numbers its log file.
	id           string
	restartCount int32
	// bundleDir is the instance's bundle; containerDir the container's directory
	// (logs, termination messages) and etcDir the pod's /etc files.
	bundleDir, containerDir, etcDir string
	// volumes are the container's volume mounts with their resolved sources, in
	// spec order.
	volumes []volumeSource
	// The pod's sandbox: namespaces (paths), hostname and cgroup.
	netNS, ipcNS, utsNS, pidNS string
	hostname, podCgroup        string
	// The node's: memory, Localhost seccomp profiles, capabilities, cgroup version,
	// log rotation.
	nodeMemory       int64
	seccompDir       string
	hostCapabilities []string
	minOOMScoreAdj   *int
	cgroup2          bool
	logs             shim.LogPolicy
}

// volumeSource is one of a container's volume mounts with the host path it mounts
// (subPath applied) and whether that is a directory.
type volumeSource struct {
	mount  v1.VolumeMount
	source string
	dir    bool
	// noExec binds it noexec (an image volume).
	noExec bool
}

// containerPlan is what one container instance is: the input of its OCI spec and the
// files and request that run it. The spec itself is made once the root file system is
// mounted: ocispec.Spec reads the image's users and groups from it.
type containerPlan struct {
	id string
	// dir is the bundle (config.json, rootfs, upper, work).
	dir, rootfs, upper, work string
	// termLog is the file behind the container's terminationMessagePath; logPath its
	// CRI log.
	termLog, logPath string
	input            ocispec.Input
	request          shim.StartRequest
	stopSignal       syscall.Signal
	// spec is ocispec.Spec of input, once made (writeBundle).
	spec *specs.Spec
}

// planContainer computes the instance of in.container that start makes: the pod's
// /etc files, its termination-message file and volumes as bind mounts, the command
// and arguments with $(VAR) expanded, the spec's input for the pod's namespaces and
// cgroup, the paths of its bundle and logs and the shim's request. It does no I/O.
func planContainer(in planInput) *containerPlan {
	c := in.container.DeepCopy()
	lookup := environLookup(in.env)
	for i := range c.Command {
		c.Command[i] = expand(c.Command[i], lookup)
	}
	for i := range c.Args {
		c.Args[i] = expand(c.Args[i], lookup)
	}
	p := &containerPlan{
		id:         in.id,
		dir:        in.bundleDir,
		rootfs:     filepath.Join(in.bundleDir, "rootfs"),
		upper:      filepath.Join(in.bundleDir, "upper"),
		work:       filepath.Join(in.bundleDir, "work"),
		termLog:    filepath.Join(in.containerDir, in.id[:16]+terminationLogSuffix),
		logPath:    filepath.Join(in.containerDir, "logs", strconv.Itoa(int(in.restartCount))+".log"),
		stopSignal: stopSignal(in.image.StopSignal),
	}
	mounted := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		mounted[filepath.Clean(vm.MountPath)] = true
	}
	var mounts []ocispec.Mount
	for _, f := range []string{"hosts", "resolv.conf", "hostname"} {
		if !mounted["/etc/"+f] {
			mounts = append(mounts, ocispec.Mount{Source: filepath.Join(in.etcDir, f), Destination: "/etc/" + f, File: true})
		}
	}
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = v1.TerminationMessagePathDefault
	}
	mounts = append(mounts, ocispec.Mount{Source: p.termLog, Destination: termPath, File: true})
	for _, v := range in.volumes {
		mounts = append(mounts, ocispec.Mount{Source: v.source, Destination: v.mount.MountPath, ReadOnly: v.mount.ReadOnly, NoExec: v.noExec, File: !v.dir})
	}
	p.input = ocispec.Input{
		Pod:              in.pod,
		Container:        c,
		Image:            in.image,
		Rootfs:           p.rootfs,
		Env:              in.env,
		Mounts:           mounts,
		NetNS:            in.netNS,
		IPCNS:            in.ipcNS,
		UTSNS:            in.utsNS,
		PIDNS:            in.pidNS,
		Hostname:         in.hostname,
		CgroupsPath:      in.podCgroup + "/" + in.id,
		NodeMemory:       in.nodeMemory,
		SeccompDir:       in.seccompDir,
		HostCapabilities: in.hostCapabilities,
		MinOOMScoreAdj:   in.minOOMScoreAdj,
		Cgroup2:          in.cgroup2,
	}
	p.request = shim.StartRequest{ID: in.id, Bundle: in.bundleDir, LogPath: p.logPath, Logs: in.logs,
		TTY: c.TTY, Stdin: c.Stdin, StdinOnce: c.StdinOnce}
	return p
}

// volumeSources resolves the container's volume mounts to host paths: subPath, or
// subPathExpr expanded with the container's environment env, applied (created when
// missing, as kubelet does), and each volume given to the pod's fsGroup once. A
// subPath that cannot be used is an *ocispec.ConfigError with kubelet's wording
// (CreateContainerConfigError). ps.mu is held.
func (m *Manager) volumeSources(ps *podState, spec *v1.Container, env []string) ([]volumeSource, error) {
	var out []volumeSource
	for _, vm := range spec.VolumeMounts {
		src, ok := ps.volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, spec.Name)
		}
		if v, ok, err := imageVolumeSource(ps.pod, vm, src, env); ok && err != nil {
			return nil, err
		} else if ok {
			out = append(out, v)
			continue
		}
		sub, err := subPath(vm, env)
		if err != nil {
			return nil, err
		}
		if sub != "" {
			if src, err = makeSubPath(src, sub); err != nil {
				m.cfg.Logger.Warn("creating a subPath", "pod", podID(ps.pod), "container", spec.Name, "volume", vm.Name, "err", err)
				return nil, &ocispec.ConfigError{Message: fmt.Sprintf("failed to create subPath directory for volumeMount %q of container %q", vm.Name, spec.Name)}
			}
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("volume %q of container %q: %w", vm.Name, spec.Name, err)
		}
		if err := m.fsGroup(ps, vm.Name); err != nil {
			return nil, fmt.Errorf("giving volume %q to the pod's fsGroup: %w", vm.Name, err)
		}
		out = append(out, volumeSource{mount: vm, source: src, dir: fi.IsDir()})
	}
	return out, nil
}

// subPath is the mount's subPath, or its subPathExpr with $(VAR) replaced from env,
// checked as kubelet's makeMounts does: every variable must have a non-empty value,
// and the result must be relative and without "..".
func subPath(vm v1.VolumeMount, env []string) (string, error) {
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		lookup := environLookup(env)
		var missing []string
		sub = expand(vm.SubPathExpr, func(name string) (string, bool) {
			v, ok := lookup(name)
			if !ok || v == "" {
				if !slices.Contains(missing, name) {
					missing = append(missing, name)
				}
			}
			return v, true
		})
		if len(missing) > 0 {
			slices.Sort(missing)
			return "", &ocispec.ConfigError{Message: "missing value for " + strings.Join(missing, ", ")}
		}
	}
	if sub == "" {
		return "", nil
	}
	if filepath.IsAbs(sub) {
		return "", &ocispec.ConfigError{Message: fmt.Sprintf("error SubPath `%s` must not be an absolute path", sub)}
	}
	if slices.Contains(strings.Split(filepath.ToSlash(sub), "/"), "..") {
		return "", &ocispec.ConfigError{Message: fmt.Sprintf("unable to provision SubPath `%s`: must not contain '..'", sub)}
	}
	return sub, nil
}

// makeSubPath returns volume/sub, creating the missing directories with the volume
// directory's mode as kubelet does, and refuses a path whose symbolic links lead out
// of the volume.
func makeSubPath(volume, sub string) (string, error) {
	root, err := filepath.EvalSymlinks(volume)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	cur := root
	for _, part := range strings.Split(filepath.Clean(sub), string(filepath.Separator)) {
		next := filepath.Join(cur, part)
		if _, err := os.Lstat(next); errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(next, fi.Mode().Perm()); err != nil && !errors.Is(err, os.ErrExist) {
				return "", err
			}
			// Mkdir's mode is filtered by the umask; kubelet's is not.
			if err := os.Chmod(next, fi.Mode().Perm()); err != nil {
				return "", err
			}
		}
		if cur, err = filepath.EvalSymlinks(next); err != nil {
			return "", err
		}
		if cur != root && !strings.HasPrefix(cur, root+string(filepath.Separator)) {
			return "", fmt.Errorf("subPath %q leads out of volume %s to %s", sub, volume, cur)
		}
	}
	return filepath.Join(volume, sub), nil
}

// writeBundle makes the plan's bundle: the container's directory with a new, empty
// termination-message file (earlier instances' removed), the root file system over
// the image's layers (lowers), and config.json with the plan's spec, which it sets. A
// *ocispec.ConfigError is kubelet's CreateContainerConfigError.
func (m *Manager) writeBundle(p *containerPlan, containerDir, image string, lowers []string) error {
	if err := os.MkdirAll(containerDir, 0o755); err != nil {
		return err
	}
	pruneTerminationLogs(containerDir)
	if err := os.WriteFile(p.termLog, nil, 0o666); err != nil {
		return err
	}
	// Any user the container runs as may write its message: kubelet chmods the file
	// 0666, which the umask would otherwise cut.
	if err := os.Chmod(p.termLog, 0o666); err != nil {
		return err
	}
	if err := m.run.MountRootfs(lowers, p.upper, p.work, p.rootfs); err != nil {
		return fmt.Errorf("mounting the root file system of image %q: %w", image, err)
	}
	s, err := ocispec.Spec(p.input)
	if err != nil {
		return err
	}
	// A tty container's terminal is made by runc in the container's /dev/pts and
	// handed to the shim, which serves it to attached clients.
	s.Process.Terminal = p.request.TTY
	p.spec = s
	return runc.WriteBundle(p.dir, s)
}

// runPlan starts the plan's process through the shim, its CRI log in a directory
// that keeps the previous instance's files; it returns the process's host PID.
func (m *Manager) runPlan(p *containerPlan, restartCount int32) (int, error) {
	logs := filepath.Dir(p.logPath)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return 0, err
	}
	m.pruneLogs(logs, int(restartCount))
	// The shim runs the container, owns its stdio and log, and outlives this agent.
	return m.run.Start(context.Background(), p.request)
}
