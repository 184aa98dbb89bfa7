// Package ocispec turns one Kubernetes container of a pod, with its image's config,
// into the OCI runtime spec runc runs it from, with the meaning kubelet and
// containerd's CRI plugin give the same pod. It is pure: the only files it reads are
// the root file system's /etc/passwd and /etc/group and Localhost seccomp profiles.
//
// Errors follow kubelet's split: a *ConfigError is what kubelet itself refuses
// (CreateContainerConfigError, kubelet's wording: runAsNonRoot, a Localhost profile
// without a name, forbidden sysctls, hostUsers: false); anything else is what
// containerd or runc would refuse (CreateContainerError: nothing to run, an unknown
// user, an unreadable seccomp profile, in containerd's wording).
//
// The defaults, and where each comes from:
//
//	field                        our value                                             who sets it that way
//	process.args                 command/args over ENTRYPOINT/CMD (Args)               kubelet docs; containerd CRI WithProcessArgs
//	process.env                  PATH default, HOSTNAME, image Env, Kubernetes Env     containerd WithDefaultPathEnv, WithEnv order
//	process.cwd                  workingDir, else image WorkingDir, else /             containerd CRI buildLinuxSpec
//	process.user                 runAsUser/runAsGroup, else image user's uid or        kubelet getImageUser (image without USER is 0,
//	                             name (its ":group" is dropped), resolved in rootfs    only the uid part is passed); containerd WithUser
//	process.user.additionalGids  gid + /etc/group memberships (not with Strict) +      containerd WithAdditionalGIDs, WithSupplementalGroups;
//	                             supplementalGroups + fsGroup, sorted                  kubelet adds fsGroup
//	process.terminal             false (the caller brings its own pty)                 -
//	process.capabilities         containerd's 14 defaults in bounding, effective,      containerd pkg/oci defaultUnixCaps; CRI WithCapabilities
//	                             permitted; add/drop with ALL; privileged = host's;    (ALL first, then names); inheritable empty since
//	                             inheritable and ambient empty                         CVE-2022-24769; CRI WithoutAmbientCaps
//	process.noNewPrivileges      allowPrivilegeEscalation == false, never when         kubelet AddNoNewPrivileges; containerd
//	                             privileged                                            WithNewPrivileges then WithNoNewPrivileges
//	process.rlimits              Input.Rlimits; none: inherited from the caller        containerd CRI WithoutDefaultSecuritySettings clears
//	                                                                                   pkg/oci's RLIMIT_NOFILE 1024:1024: containerd's own
//	process.oomScoreAdj          OOMScoreAdj (-997 / 3..999 / 1000)                    kubelet pkg/kubelet/qos
//	process.apparmorProfile      empty                                                 -
//	root                         Rootfs, readonly = readOnlyRootFilesystem             containerd WithRootFSReadonly
//	hostname                     Hostname when the container has its own UTS ns        -
//	mounts                       /proc, /dev (tmpfs 64m; host /dev when                containerd pkg/oci defaultMounts without /run
//	                             privileged), /dev/pts, /dev/shm (tmpfs 64m),          (WithoutRunMount); CRI adds /sys/fs/cgroup and
//	                             /dev/mqueue, /sys (ro), /sys/fs/cgroup (ro); rw       makes sysfs/cgroupfs rw when privileged
//	                             when privileged; then binds by depth, rbind,          CRI WithMounts: orderedMounts, a bind replaces a
//	                             rprivate, ro|rw                                       default with its destination, rprivate default
//	linux.namespaces             pid (new, PIDNS, none for hostPID), ipc (none for     containerd defaultUnixNamespaces, CRI
//	                             hostIPC), uts, mount, network
//	                             (none for hostNetwork), cgroup on cgroup v2           WithPodNamespaces; cgroupns unless privileged
//	linux.maskedPaths            kubelet's 11 defaults; none when privileged or        kubelet securitycontext defaults; containerd
//	linux.readonlyPaths          procMount Unmasked                                    WithPrivileged clears them
//	linux.resources.devices      deny all, allow null zero full random urandom         containerd pkg/oci deny-all + WithDefaultUnixDevices;
//	                             tty console ptmx pts; allow all when privileged       WithAllDevicesAllowed when privileged
//	linux.resources.cpu          shares = milli*1024/1000 in [2, 262144], period       kubelet MilliCPUToShares, MilliCPUToQuota,
//	                             100000, quota = milli*100 (>= 1000) with a limit      calculateLinuxResources
//	linux.resources.memory       limit; swap = limit on cgroup v2                      kubelet; containerd WithResources
//	linux.resources.unified      memory.oom.group=1 on cgroup v2                       kubelet singleProcessOOMKill=false
//	linux.resources.pids         PidsLimit when > 0                                    kubelet --pod-max-pids style
//	linux.sysctl                 pod sysctls, safe set (1.37) + allowed unsafe         kubelet sysctl allowlist (admission)
//	linux.seccomp                RuntimeDefault when unset; none for Unconfined or     kubelet --seccomp-default, fieldSeccompProfile;
//	                             privileged; Localhost from SeccompDir                 containerd GenerateSeccompSpecOpts, WithProfile
//	linux.seccomp (default)      ERRNO(EPERM) default; allow-list; clone without       containerd/moby default profile semantics, our own
//	                             namespace flags; clone3 ENOSYS; caps unlock more      list (seccomp.go)
//	annotations                  io.kubernetes.{pod.name,pod.namespace,pod.uid,        kubelet labels; containerd DefaultCRIAnnotations
//	                             container.name}, io.kubernetes.cri.*
//
// Not handled yet: user namespaces (hostUsers: false is refused), AppArmor and
// SELinux, hugepages limits, devices and CDI, kubelet's extra supplemental groups
// from volumes, pod-level resources (spec.resources), and the host's device list for
// privileged containers (the host's /dev is bound instead).
package ocispec
