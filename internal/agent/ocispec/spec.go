package ocispec

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	crv1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// Mount is a bind mount into the container: a volume (subPath already applied), or one
// of the files kubelet provides (/etc/hosts, /etc/resolv.conf, /etc/hostname,
// /dev/termination-log). A Mount whose Destination is one of the default mounts (for
// example /dev/shm, the pod's shared memory) replaces it.
type Mount struct {
	// Source is the host path.
	Source string
	// Destination is the absolute path in the container.
	Destination string
	// ReadOnly mounts it read-only.
	ReadOnly bool
	// NoExec mounts it noexec (an image volume's files are not to be run).
	NoExec bool
	// File says Source is a file, not a directory: runc creates the mount point to
	// match the source by itself, so the spec does not carry it.
	File bool
}

// Input is everything Spec needs to know about one container of a pod.
type Input struct {
	// Pod is the container's pod.
	Pod *v1.Pod
	// Container is the container, with $(VAR) references in command and args
	// already expanded.
	Container *v1.Container
	// Image is the image's configuration (Entrypoint, Cmd, Env, WorkingDir, User).
	Image crv1.Config
	// Rootfs is the absolute path of the container's mounted root file system.
	Rootfs string
	// Env is the Kubernetes environment, NAME=value, computed by the caller (env,
	// envFrom, downward API, service links). It must not carry a default PATH: the
	// image's Env goes under it, and PATH comes from one of them or the default.
	Env []string
	// Mounts are the bind mounts, in any order.
	Mounts []Mount
	// NetNS is the pod's network namespace path; "" is hostNetwork (no network
	// namespace entry: the container shares the agent's).
	NetNS string
	// IPCNS and UTSNS are the pod's IPC and UTS namespace paths; "" creates new ones.
	IPCNS, UTSNS string
	// PIDNS is the PID namespace to join (shareProcessNamespace, hostPID); "" creates
	// the container's own.
	PIDNS string
	// Hostname is the pod's hostname: $HOSTNAME always, and the spec's hostname when
	// UTSNS is "".
	Hostname string
	// CgroupsPath is the container's cgroup, e.g. "/tranche/node-1/pod<uid>/<id>".
	CgroupsPath string
	// NodeMemory is the node's memory capacity in bytes, for a Burstable
	// container's oom_score_adj.
	NodeMemory int64
	// MinOOMScoreAdj, when set, is the lowest oom_score_adj runc can give the
	// container: without CAP_SYS_RESOURCE no process may lower a score below the
	// minimum it inherited (proc(5)), and runc then fails the container with "can't
	// get final child's PID from pipe". kubelet would fail every Guaranteed pod on
	// such a host; the score is raised to this floor instead (see MinOOMScoreAdj()).
	MinOOMScoreAdj *int
	// SeccompDir is the directory of Localhost seccomp profiles (kubelet's
	// <root-dir>/seccomp).
	SeccompDir string
	// PidsLimit is the container's pids.max; 0 sets none.
	PidsLimit int64
	// Cgroup2 says the node uses the unified cgroup hierarchy: the container gets
	// its own cgroup namespace (containerd) and memory.oom.group (kubelet).
	Cgroup2 bool
	// AllowedUnsafeSysctls is kubelet's --allowed-unsafe-sysctls: names or
	// prefixes ending in "*" allowed beyond the safe set.
	AllowedUnsafeSysctls []string
	// HostCapabilities are the capabilities the agent itself holds (its bounding
	// set, CAP_ names): what "ALL" adds and what a privileged container gets, as
	// containerd uses its own current set (WithAllCurrentCapabilities) so that runc
	// is never asked for more than it has. nil means every capability Linux defines.
	HostCapabilities []string
	// Rlimits are the process's resource limits. nil leaves them to what runc
	// inherits from its caller, as a CRI container inherits containerd's: the CRI
	// clears pkg/oci's RLIMIT_NOFILE 1024:1024. Raising a hard limit above the
	// caller's fails the start, so a fixed default would not be safe.
	Rlimits []specs.POSIXRlimit
}

// Defaults containerd and kubelet apply; doc.go's table says where each comes from.
const (
	defaultPath    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	tmpfsSize      = "size=65536k" // containerd's /dev and /dev/shm
	podNameKey     = "io.kubernetes.pod.name"
	podNSKey       = "io.kubernetes.pod.namespace"
	podUIDKey      = "io.kubernetes.pod.uid"
	containerKey   = "io.kubernetes.container.name"
	criTypeKey     = "io.kubernetes.cri.container-type"
	criNameKey     = "io.kubernetes.cri.container-name"
	criImageKey    = "io.kubernetes.cri.image-name"
	criSandboxName = "io.kubernetes.cri.sandbox-name"
	criSandboxNS   = "io.kubernetes.cri.sandbox-namespace"
	criSandboxUID  = "io.kubernetes.cri.sandbox-uid"
)

// defaultCaps is containerd's default capability set (pkg/oci defaultUnixCaps), the
// same as Docker's.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// allCaps is every capability Linux defines (0 to CAP_CHECKPOINT_RESTORE, 40): what
// "ALL" adds and a privileged container holds when Input.HostCapabilities is nil.
var allCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// maskedPaths and readonlyPaths are kubelet's defaults for procMount Default
// (pkg/securitycontext/util.go, kept in sync with moby); containerd's CRI applies
// exactly what kubelet sends.
var (
	maskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// Spec builds the OCI runtime spec runc runs the container from, with the semantics
// kubelet and containerd's CRI give a pod's container. A *ConfigError is what kubelet
// reports as CreateContainerConfigError; any other error is a CreateContainerError.
func Spec(in Input) (*specs.Spec, error) {
	return build(in, goruntime.GOARCH)
}

// build is Spec for a given architecture (the seccomp profile depends on it).
func build(in Input, goarch string) (*specs.Spec, error) {
	if in.Pod == nil || in.Container == nil {
		return nil, errors.New("ocispec: Input needs a Pod and a Container")
	}
	if !filepath.IsAbs(in.Rootfs) {
		return nil, fmt.Errorf("ocispec: root file system %q is not an absolute path", in.Rootfs)
	}
	for _, m := range in.Mounts {
		if !filepath.IsAbs(m.Destination) || !filepath.IsAbs(m.Source) {
			return nil, fmt.Errorf("ocispec: mount %q on %q: source and destination must be absolute paths", m.Source, m.Destination)
		}
	}
	pod, c := in.Pod, in.Container
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		return nil, &ConfigError{Message: "pod " + podString(pod) + " asks for a user namespace (hostUsers: false), which this node cannot give: " +
			"Kubernetes' user namespaces need idmapped mounts from the OCI runtime, and Debian 12's runc (1.1) has none (runc 1.2 and later do)"}
	}
	sysctl, err := sysctls(pod, in.AllowedUnsafeSysctls)
	if err != nil {
		return nil, err
	}
	sc := effectiveSecurityContext(pod, c)
	privileged := sc.Privileged != nil && *sc.Privileged

	imageUID, imageName := imageUser(in.Image.User)
	if err := verifyRunAsNonRoot(pod, c, sc, imageUID, imageName); err != nil {
		return nil, err
	}
	args, err := Args(c, in.Image)
	if err != nil {
		return nil, err
	}
	user, err := processUser(in, sc, imageUID, imageName)
	if err != nil {
		return nil, err
	}
	host := allCaps
	if in.HostCapabilities != nil {
		host = in.HostCapabilities
	}
	bounding, err := capabilities(sc, privileged, host)
	if err != nil {
		return nil, err
	}

	adj := OOMScoreAdj(pod, c, in.NodeMemory)
	if in.MinOOMScoreAdj != nil {
		adj = max(adj, *in.MinOOMScoreAdj)
	}
	cwd := "/"
	switch {
	case c.WorkingDir != "":
		cwd = c.WorkingDir
	case in.Image.WorkingDir != "":
		cwd = in.Image.WorkingDir
	}
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User: user,
			Args: args,
			Env:  environment(in),
			Cwd:  cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  bounding,
				Effective: slices.Clone(bounding),
				Permitted: slices.Clone(bounding),
			},
			Rlimits:         slices.Clone(in.Rlimits),
			NoNewPrivileges: !privileged && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
			OOMScoreAdj:     &adj,
		},
		Root:        &specs.Root{Path: in.Rootfs, Readonly: sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		Mounts:      mounts(in.Mounts, privileged),
		Annotations: annotations(pod, c),
		Linux: &specs.Linux{
			Sysctl:      sysctl,
			Resources:   containerResources(c, in.PidsLimit, in.Cgroup2),
			CgroupsPath: in.CgroupsPath,
			Namespaces:  namespaces(in, privileged),
		},
	}
	if in.UTSNS == "" {
		s.Hostname = in.Hostname
	}
	switch {
	case privileged:
		// containerd's WithPrivileged and WithAllDevicesAllowed. The host's devices
		// come from binding the host's /dev (see mounts), not from listing them.
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	default:
		s.Linux.Resources.Devices = defaultDevices()
		if sc.ProcMount == nil || *sc.ProcMount != v1.UnmaskedProcMount {
			s.Linux.MaskedPaths = slices.Clone(maskedPaths)
			s.Linux.ReadonlyPaths = slices.Clone(readonlyPaths)
		}
	}
	s.Linux.Seccomp, err = seccompProfile(in, privileged, bounding, goarch)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// podString is kubelet's format.Pod: name_namespace(uid).
func podString(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace + "(" + string(pod.UID) + ")"
}

// effectiveSecurityContext is kubelet's DetermineEffectiveSecurityContext: the
// container's security context, with the pod's runAsUser, runAsGroup, runAsNonRoot,
// seccompProfile, seLinuxOptions and appArmorProfile where the container leaves them
// unset. It never returns nil.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	sc := &v1.SecurityContext{}
	if c.SecurityContext != nil {
		sc = c.SecurityContext.DeepCopy()
	}
	if p := pod.Spec.SecurityContext; p != nil {
		if sc.RunAsUser == nil {
			sc.RunAsUser = p.RunAsUser
		}
		if sc.RunAsGroup == nil {
			sc.RunAsGroup = p.RunAsGroup
		}
		if sc.RunAsNonRoot == nil {
			sc.RunAsNonRoot = p.RunAsNonRoot
		}
		if sc.SeccompProfile == nil {
			sc.SeccompProfile = p.SeccompProfile
		}
		if sc.SELinuxOptions == nil {
			sc.SELinuxOptions = p.SELinuxOptions
		}
		if sc.AppArmorProfile == nil {
			sc.AppArmorProfile = p.AppArmorProfile
		}
	}
	return sc
}

// imageUser is how the image's USER reaches kubelet through containerd's ImageStatus:
// the part before ":" as a uid when it is numeric, else as a user name; an image
// without USER is uid 0 (kubelet's getImageUser).
func imageUser(user string) (*int64, string) {
	if user == "" {
		return new(int64), ""
	}
	part, _, _ := strings.Cut(user, ":")
	if uid, err := strconv.ParseInt(part, 10, 64); err == nil {
		return &uid, ""
	}
	return nil, part
}

// verifyRunAsNonRoot is kubelet's check (pkg/kubelet/kuberuntime/
// security_context_others.go), with its wording, done before anything runs: it trusts
// only numbers, so an image user given by name fails even if that name is not root.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, sc *v1.SecurityContext, uid *int64, name string) error {
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return &ConfigError{Message: fmt.Sprintf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podString(pod), c.Name)}
		}
		return nil
	}
	switch {
	case uid == nil && name != "":
		return &ConfigError{Message: fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", name, podString(pod), c.Name)}
	case uid != nil && *uid == 0:
		return &ConfigError{Message: fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podString(pod), c.Name)}
	case uid != nil && (*uid < 0 || *uid > math.MaxInt32):
		return &ConfigError{Message: fmt.Sprintf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): must be between 0 and %d, inclusive (pod: %q, container: %s)",
			*uid, math.MaxInt32, math.MaxInt32, podString(pod), c.Name)}
	}
	return nil
}

// processUser is the process's uid, gid and groups. The user is runAsUser, else the
// image user's uid or name (kubelet passes only that part on: an image's
// "USER 1000:50" runs with 1000's group from /etc/passwd, not 50), else root; a
// runAsGroup is its group. containerd resolves it in the root file system (ResolveUser)
// and sets the additional groups to the primary gid, the user's /etc/group memberships
// (unless supplementalGroupsPolicy is Strict), the pod's supplementalGroups and its
// fsGroup, sorted.
func processUser(in Input, sc *v1.SecurityContext, imageUID *int64, imageName string) (specs.User, error) {
	var user string
	switch {
	case sc.RunAsUser != nil:
		user = strconv.FormatInt(*sc.RunAsUser, 10)
	case imageUID != nil:
		user = strconv.FormatInt(*imageUID, 10)
	default:
		user = imageName
	}
	if sc.RunAsGroup != nil {
		user += ":" + strconv.FormatInt(*sc.RunAsGroup, 10)
	}
	uid, gid, groups, err := ResolveUser(in.Rootfs, user)
	if err != nil {
		return specs.User{}, err
	}
	set := []uint32{gid}
	psc := in.Pod.Spec.SecurityContext
	if psc == nil || psc.SupplementalGroupsPolicy == nil || *psc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict {
		set = append(set, groups...)
	}
	if psc != nil {
		if psc.FSGroup != nil {
			set = append(set, uint32(*psc.FSGroup))
		}
		for _, g := range psc.SupplementalGroups {
			set = append(set, uint32(g))
		}
	}
	slices.Sort(set)
	return specs.User{UID: uid, GID: gid, AdditionalGids: slices.Compact(set)}, nil
}

// capabilities is the bounding (and effective and permitted) set as containerd's CRI
// builds it: the default set; "ALL" in add makes it every capability the host holds,
// then "ALL" in drop empties it; then the named adds, then the named drops (names with
// or without CAP_, any case). A privileged container has every capability the host
// holds, whatever it asks. The
// inheritable and ambient sets stay empty: containerd stopped filling inheritable
// (CVE-2022-24769) and clears ambient, so a non-root process keeps only what file
// capabilities give it after execve.
func capabilities(sc *v1.SecurityContext, privileged bool, host []string) ([]string, error) {
	if privileged {
		return slices.Clone(host), nil
	}
	caps := slices.Clone(defaultCaps)
	if sc.Capabilities == nil {
		return caps, nil
	}
	isAll := func(c v1.Capability) bool { return strings.EqualFold(string(c), "ALL") }
	if slices.ContainsFunc(sc.Capabilities.Add, isAll) {
		caps = slices.Clone(host)
	}
	if slices.ContainsFunc(sc.Capabilities.Drop, isAll) {
		caps = nil
	}
	for _, c := range sc.Capabilities.Add {
		if isAll(c) {
			continue
		}
		name, err := capName(c)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(caps, name) {
			caps = append(caps, name)
		}
	}
	for _, c := range sc.Capabilities.Drop {
		if isAll(c) {
			continue
		}
		name, err := capName(c)
		if err != nil {
			return nil, err
		}
		caps = slices.DeleteFunc(caps, func(have string) bool { return have == name })
	}
	return caps, nil
}

// capName is c as the OCI spec names it: upper case with the CAP_ prefix.
func capName(c v1.Capability) (string, error) {
	name := strings.ToUpper(string(c))
	if !strings.HasPrefix(name, "CAP_") {
		name = "CAP_" + name
	}
	if !slices.Contains(allCaps, name) {
		return "", fmt.Errorf("unknown capability %q", string(c))
	}
	return name, nil
}

// environment is containerd's order: the default PATH, HOSTNAME, the image's Env, the
// Kubernetes Env; a later NAME=value replaces an earlier one in place, and a bare NAME
// removes it.
func environment(in Input) []string {
	env := []string{defaultPath}
	if in.Hostname != "" {
		env = mergeEnv(env, []string{"HOSTNAME=" + in.Hostname})
	}
	env = mergeEnv(env, in.Image.Env)
	return mergeEnv(env, in.Env)
}

// mergeEnv is containerd's replaceOrAppendEnvValues.
func mergeEnv(base, over []string) []string {
	out := slices.Clone(base)
	index := map[string]int{}
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		index[k] = i
	}
	removed := map[int]bool{}
	for _, kv := range over {
		k, _, ok := strings.Cut(kv, "=")
		i, exists := index[k]
		switch {
		case !ok && exists:
			removed[i] = true
		case !ok:
		case exists:
			out[i] = kv
			delete(removed, i)
		default:
			index[k] = len(out)
			out = append(out, kv)
		}
	}
	if len(removed) == 0 {
		return out
	}
	kept := out[:0:0]
	for i, kv := range out {
		if !removed[i] {
			kept = append(kept, kv)
		}
	}
	return kept
}

// mounts is containerd's default set without /run (the CRI removes it), plus
// /sys/fs/cgroup, minus any default a bind mount replaces (any /dev/... one when /dev
// itself is mounted), then the bind mounts ordered by depth so a parent comes before
// its children (containerd's orderedMounts, a stable sort). Each bind is rbind and
// rprivate (kubelet's default propagation), ro or rw. A privileged container gets the
// host's /dev bound instead of a tmpfs, and sysfs and cgroupfs read-write.
func mounts(binds []Mount, privileged bool) []specs.Mount {
	ro := "ro"
	if privileged {
		ro = "rw"
	}
	dev := specs.Mount{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", tmpfsSize}}
	if privileged {
		dev = specs.Mount{Destination: "/dev", Type: "bind", Source: "/dev", Options: []string{"rbind", "rprivate", "nosuid", "rw"}}
	}
	defaults := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		dev,
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", tmpfsSize}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", ro}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", ro}},
	}
	sorted := slices.Clone(binds)
	sort.SliceStable(sorted, func(i, j int) bool { return depth(sorted[i].Destination) < depth(sorted[j].Destination) })
	replaced := map[string]bool{}
	for _, b := range sorted {
		replaced[filepath.Clean(b.Destination)] = true
	}
	var out []specs.Mount
	for _, m := range defaults {
		if replaced[m.Destination] || (replaced["/dev"] && strings.HasPrefix(m.Destination, "/dev/")) {
			continue
		}
		out = append(out, m)
	}
	for _, b := range sorted {
		mode := "rw"
		if b.ReadOnly {
			mode = "ro"
		}
		opts := []string{"rbind", "rprivate", mode}
		if b.NoExec {
			opts = append(opts, "noexec")
		}
		out = append(out, specs.Mount{Destination: b.Destination, Type: "bind", Source: b.Source, Options: opts})
	}
	return out
}

// depth is the number of path elements of a container path.
func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

// namespaces are containerd's (pid, ipc, uts, mount, network) with the pod's paths
// joined: no network entry for hostNetwork, no PID entry for hostPID and no IPC entry
// for hostIPC (the container keeps the node's, which the agent runs in, as the CRI
// does with NamespaceMode NODE), a new PID namespace unless one is given, and a cgroup
// namespace on cgroup v2 for an unprivileged container.
func namespaces(in Input, privileged bool) []specs.LinuxNamespace {
	var ns []specs.LinuxNamespace
	if !in.Pod.Spec.HostPID {
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: in.PIDNS})
	}
	if !in.Pod.Spec.HostIPC {
		ns = append(ns, specs.LinuxNamespace{Type: specs.IPCNamespace, Path: in.IPCNS})
	}
	ns = append(ns,
		specs.LinuxNamespace{Type: specs.UTSNamespace, Path: in.UTSNS},
		specs.LinuxNamespace{Type: specs.MountNamespace},
	)
	if in.NetNS != "" {
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: in.NetNS})
	}
	if in.Cgroup2 && !privileged {
		ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	return ns
}

// defaultDevices denies every device, then allows the ones every container has
// (containerd's WithDefaultUnixDevices): null, zero, full, random, urandom, tty,
// console, ptmx and the pseudo-terminals under /dev/pts. runc creates the nodes.
func defaultDevices() []specs.LinuxDeviceCgroup {
	rules := []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
	for _, d := range []struct{ major, minor int64 }{{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 1}, {5, 2}, {136, -1}} {
		rule := specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &d.major, Access: "rwm"}
		if d.minor >= 0 {
			rule.Minor = &d.minor
		}
		rules = append(rules, rule)
	}
	return rules
}

// annotations identify the container as kubelet's labels and containerd's CRI
// annotations do.
func annotations(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		podNameKey:     pod.Name,
		podNSKey:       pod.Namespace,
		podUIDKey:      string(pod.UID),
		containerKey:   c.Name,
		criTypeKey:     "container",
		criNameKey:     c.Name,
		criImageKey:    c.Image,
		criSandboxName: pod.Name,
		criSandboxNS:   pod.Namespace,
		criSandboxUID:  string(pod.UID),
	}
}
