package ocispec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// Syscalls the RuntimeDefault profile allows to every container, grouped by what they
// are for. The set follows the syscalls containerd's and Docker's default profiles
// allow (contrib/seccomp in containerd, profiles/seccomp in moby): everything a
// process needs to run, and nothing that changes the host (mounts, modules, kexec,
// reboot, swap, clock, keyrings, bpf, perf, userfaultfd, namespaces). Names a kernel or
// libseccomp does not know are skipped by runc, so newer syscalls can be listed.
var (
	// Processes, threads, signals and scheduling. clone is allowed separately
	// (without namespace flags); clone3 fails with ENOSYS so libc falls back to it.
	seccompProcess = []string{
		"execve", "execveat", "exit", "exit_group", "fork", "vfork", "wait4", "waitid", "waitpid",
		"kill", "tkill", "tgkill", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
		"rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigreturn", "rt_sigsuspend",
		"rt_sigtimedwait", "rt_sigtimedwait_time64", "sigaltstack", "sigprocmask", "sigreturn",
		"signalfd", "signalfd4", "pause", "restart_syscall",
		"pidfd_open", "pidfd_send_signal", "process_mrelease",
		"getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid", "getsid", "setsid",
		"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "get_thread_area",
		"set_thread_area", "uretprobe",
		"prctl", "capget", "capset", "seccomp", "landlock_add_rule", "landlock_create_ruleset",
		"landlock_restrict_self", "lsm_get_self_attr", "lsm_list_modules", "lsm_set_self_attr",
		"getpriority", "setpriority", "ioprio_get", "ioprio_set",
		"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getattr", "sched_setattr",
		"sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
		"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
		"sched_rr_get_interval_time64", "getcpu",
		"getrlimit", "setrlimit", "prlimit64", "ugetrlimit", "getrusage", "times",
		"uname", "sysinfo", "getrandom", "membarrier",
		"ptrace", "process_vm_readv", "process_vm_writev", // allowed on kernels >= 4.8, as containerd does
	}
	// Credentials.
	seccompCredentials = []string{
		"getuid", "getuid32", "geteuid", "geteuid32", "getgid", "getgid32", "getegid", "getegid32",
		"getresuid", "getresuid32", "getresgid", "getresgid32", "getgroups", "getgroups32",
		"setuid", "setuid32", "setgid", "setgid32", "setreuid", "setreuid32", "setregid", "setregid32",
		"setresuid", "setresuid32", "setresgid", "setresgid32", "setgroups", "setgroups32",
		"setfsuid", "setfsuid32", "setfsgid", "setfsgid32",
	}
	// Memory.
	seccompMemory = []string{
		"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
		"mlock", "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages",
		"memfd_create", "memfd_secret", "map_shadow_stack", "mseal",
		"pkey_alloc", "pkey_free", "pkey_mprotect",
	}
	// Files, directories and their metadata.
	seccompFiles = []string{
		"open", "openat", "openat2", "creat", "close", "close_range", "read", "readv", "pread64",
		"preadv", "preadv2", "write", "writev", "pwrite64", "pwritev", "pwritev2", "lseek", "_llseek",
		"dup", "dup2", "dup3", "fcntl", "fcntl64", "ioctl", "flock", "pipe", "pipe2",
		"sendfile", "sendfile64", "splice", "tee", "vmsplice", "copy_file_range", "readahead",
		"fadvise64", "fadvise64_64", "fallocate", "fsync", "fdatasync", "sync", "syncfs",
		"sync_file_range", "truncate", "truncate64", "ftruncate", "ftruncate64",
		"stat", "stat64", "lstat", "lstat64", "fstat", "fstat64", "fstatat64", "newfstatat", "statx",
		"statfs", "statfs64", "fstatfs", "fstatfs64", "access", "faccessat", "faccessat2",
		"getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir",
		"mknod", "mknodat", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat",
		"rename", "renameat", "renameat2", "readlink", "readlinkat",
		"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "chown32", "fchown", "fchown32",
		"fchownat", "lchown", "lchown32", "umask", "utime", "utimes", "utimensat",
		"utimensat_time64", "futimesat", "name_to_handle_at", "cachestat", "statmount", "listmount",
		"getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr", "lsetxattr", "fsetxattr",
		"setxattrat", "listxattr", "llistxattr", "flistxattr", "listxattrat", "removexattr",
		"lremovexattr", "fremovexattr", "removexattrat",
		"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fanotify_mark",
		"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
		"io_pgetevents_time64",
	}
	// Waiting, timers and clocks (reading them; setting the clock needs CAP_SYS_TIME).
	seccompTime = []string{
		"select", "_newselect", "pselect6", "pselect6_time64", "poll", "ppoll", "ppoll_time64",
		"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_wait",
		"epoll_wait_old", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
		"futex", "futex_time64", "futex_waitv", "futex_wait", "futex_wake", "futex_requeue",
		"nanosleep", "clock_nanosleep", "clock_nanosleep_time64", "clock_gettime",
		"clock_gettime64", "clock_getres", "clock_getres_time64", "gettimeofday", "time",
		"adjtimex", "clock_adjtime", "clock_adjtime64", "alarm", "getitimer", "setitimer",
		"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64",
		"timer_settime", "timer_settime64", "timerfd_create", "timerfd_gettime",
		"timerfd_gettime64", "timerfd_settime", "timerfd_settime64",
	}
	// Sockets (socket itself is filtered by address family) and System V / POSIX IPC.
	seccompIPC = []string{
		"socketpair", "socketcall", "bind", "connect", "listen", "accept", "accept4",
		"getsockname", "getpeername", "getsockopt", "setsockopt", "shutdown",
		"send", "sendto", "sendmsg", "sendmmsg", "recv", "recvfrom", "recvmsg", "recvmmsg",
		"recvmmsg_time64",
		"ipc", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
		"semtimedop_time64", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl",
		"mq_open", "mq_unlink", "mq_timedsend", "mq_timedsend_time64", "mq_timedreceive",
		"mq_timedreceive_time64", "mq_notify", "mq_getsetattr",
	}
	// Per architecture.
	seccompArch = map[string][]string{
		"amd64": {"arch_prctl", "modify_ldt"},
		"arm64": {"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls"},
	}
	// The architectures a profile covers: the native one and the compat ABIs it runs.
	seccompArches = map[string][]specs.Arch{
		"amd64": {specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
		"arm64": {specs.ArchAARCH64, specs.ArchARM},
	}
	// Syscalls a capability in the bounding set unlocks, as in containerd's profile.
	seccompByCap = []struct {
		capability string
		names      []string
	}{
		{"CAP_DAC_READ_SEARCH", []string{"open_by_handle_at"}},
		{"CAP_SYS_ADMIN", []string{"bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
			"lookup_dcookie", "mount", "mount_setattr", "move_mount", "open_tree", "perf_event_open", "quotactl",
			"quotactl_fd", "setdomainname", "sethostname", "setns", "syslog", "umount", "umount2", "unshare"}},
		{"CAP_SYS_BOOT", []string{"reboot"}},
		{"CAP_SYS_CHROOT", []string{"chroot"}},
		{"CAP_SYS_MODULE", []string{"delete_module", "init_module", "finit_module"}},
		{"CAP_SYS_PACCT", []string{"acct"}},
		{"CAP_SYS_PTRACE", []string{"kcmp", "pidfd_getfd", "process_madvise"}},
		{"CAP_SYS_RAWIO", []string{"iopl", "ioperm"}},
		{"CAP_SYS_TIME", []string{"settimeofday", "stime", "clock_settime", "clock_settime64"}},
		{"CAP_SYS_TTY_CONFIG", []string{"vhangup"}},
		{"CAP_SYS_NICE", []string{"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"}},
		{"CAP_SYSLOG", []string{"syslog"}},
		{"CAP_BPF", []string{"bpf"}},
		{"CAP_PERFMON", []string{"perf_event_open"}},
	}
)

// Linux constants the profile's argument filters use (linux/socket.h, linux/sched.h,
// linux/personality.h); spelled out so the package builds and tests on any GOOS.
const (
	afALG   = 38
	afVSOCK = 40
	// cloneNamespaces is CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET.
	cloneNamespaces = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
	errnoEPERM      = 1
	errnoENOSYS     = 38
)

// defaultSeccomp is the RuntimeDefault profile for goarch and a process whose bounding
// capability set is bounding: deny with EPERM by default, allow the syscalls above,
// socket for every family but AF_ALG and AF_VSOCK, personality only for the harmless
// personas, clone without namespace flags and clone3 as ENOSYS (glibc then uses clone)
// unless CAP_SYS_ADMIN, and the syscalls each held capability needs.
func defaultSeccomp(goarch string, bounding []string) *specs.LinuxSeccomp {
	eperm := uint(errnoEPERM)
	p := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   seccompArches[goarch],
	}
	allow := func(names []string, args ...specs.LinuxSeccompArg) {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: names, Action: specs.ActAllow, Args: args})
	}
	var base []string
	for _, group := range [][]string{seccompProcess, seccompCredentials, seccompMemory, seccompFiles, seccompTime, seccompIPC, seccompArch[goarch]} {
		base = append(base, group...)
	}
	allow(base)
	// One rule per range: conditions on the same argument in one rule would be ANDed
	// by libseccomp only when runc does not split them, so keep each rule simple.
	allow([]string{"socket"}, specs.LinuxSeccompArg{Index: 0, Value: afALG, Op: specs.OpLessThan})
	allow([]string{"socket"}, specs.LinuxSeccompArg{Index: 0, Value: afALG + 1, Op: specs.OpEqualTo})
	allow([]string{"socket"}, specs.LinuxSeccompArg{Index: 0, Value: afVSOCK, Op: specs.OpGreaterThan})
	for _, persona := range []uint64{0x0, 0x0008, 0x20000, 0x20008, 0xffffffff} {
		allow([]string{"personality"}, specs.LinuxSeccompArg{Index: 0, Value: persona, Op: specs.OpEqualTo})
	}
	for _, rule := range seccompByCap {
		if slices.Contains(bounding, rule.capability) {
			allow(rule.names)
		}
	}
	if !slices.Contains(bounding, "CAP_SYS_ADMIN") {
		allow([]string{"clone"}, specs.LinuxSeccompArg{Index: 0, Value: cloneNamespaces, ValueTwo: 0, Op: specs.OpMaskedEqual})
		enosys := uint(errnoENOSYS)
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys})
	}
	return p
}

// seccompProfile picks the container's profile as kubelet does with --seccomp-default
// (container field, else pod field, else RuntimeDefault) and builds it as containerd's
// CRI does: none for a privileged container or Unconfined, the default profile for
// RuntimeDefault, and the JSON file <dir>/<localhostProfile> for Localhost.
func seccompProfile(in Input, privileged bool, bounding []string, goarch string) (*specs.LinuxSeccomp, error) {
	var sp *v1.SeccompProfile
	if sc := in.Pod.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		sp = sc.SeccompProfile
	}
	if sc := in.Container.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		sp = sc.SeccompProfile
	}
	if sp != nil && sp.Type == v1.SeccompProfileTypeLocalhost && (sp.LocalhostProfile == nil || *sp.LocalhostProfile == "") {
		// kubelet's fieldSeccompProfile, before anything reaches the runtime.
		return nil, &ConfigError{Message: "localhostProfile must be set if seccompProfile type is Localhost."}
	}
	if privileged {
		return nil, nil
	}
	switch {
	case sp == nil || sp.Type == v1.SeccompProfileTypeRuntimeDefault:
		return defaultSeccomp(goarch, bounding), nil
	case sp.Type == v1.SeccompProfileTypeUnconfined:
		return nil, nil
	case sp.Type == v1.SeccompProfileTypeLocalhost:
		// kubelet joins the root and the profile; containerd reads it. Its failures
		// are the runtime's (CreateContainerError), worded as containerd words them.
		name := filepath.Join(in.SeccompDir, *sp.LocalhostProfile)
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("failed to generate seccomp spec opts: cannot load seccomp profile %q: %v", name, err)
		}
		p := &specs.LinuxSeccomp{}
		if err := json.Unmarshal(b, p); err != nil {
			return nil, fmt.Errorf("failed to generate seccomp spec opts: decoding seccomp profile failed %q: %v", name, err)
		}
		return p, nil
	default:
		return nil, fmt.Errorf("failed to generate seccomp spec opts: seccomp unknown ProfileType %q", sp.Type)
	}
}
