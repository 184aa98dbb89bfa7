package ocispec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	crv1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

func ptr[T any](v T) *T { return &v }

// mustSpec builds in's spec for amd64 and fails the test on an error.
func mustSpec(t *testing.T, in Input) *specs.Spec {
	t.Helper()
	s, err := build(in, "amd64")
	if err != nil {
		t.Fatalf("Spec: %v", err)
	}
	return s
}

func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		image    []string
		env      []string
		hostname string
		want     []string
	}{
		{name: "default PATH and HOSTNAME", hostname: "web", want: []string{defaultPath, "HOSTNAME=web"}},
		{name: "image PATH replaces the default in place", image: []string{"PATH=/opt/bin", "LANG=C"},
			want: []string{"PATH=/opt/bin", "LANG=C"}},
		{name: "container wins over image", image: []string{"PATH=/opt/bin", "MODE=image"}, env: []string{"MODE=pod", "X=1"},
			want: []string{"PATH=/opt/bin", "MODE=pod", "X=1"}},
		{name: "container PATH wins", image: []string{"PATH=/opt/bin"}, env: []string{"PATH=/mine"}, want: []string{"PATH=/mine"}},
		{name: "container HOSTNAME wins", env: []string{"HOSTNAME=other"}, hostname: "web", want: []string{defaultPath, "HOSTNAME=other"}},
		{name: "bare name removes", image: []string{"A=1", "B=2"}, env: []string{"A"}, want: []string{defaultPath, "B=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, makePod(), crv1.Config{Cmd: []string{"sh"}, Env: tc.image})
			in.Env, in.Hostname = tc.env, tc.hostname
			if diff := cmp.Diff(tc.want, mustSpec(t, in).Process.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCwd(t *testing.T) {
	for _, tc := range []struct{ name, container, image, want string }{
		{"default", "", "", "/"},
		{"image", "", "/srv", "/srv"},
		{"container wins", "/work", "/srv", "/work"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, makePod(func(p *v1.Pod) { p.Spec.Containers[0].WorkingDir = tc.container }),
				crv1.Config{Cmd: []string{"sh"}, WorkingDir: tc.image})
			if got := mustSpec(t, in).Process.Cwd; got != tc.want {
				t.Errorf("cwd = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUser(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		image string
		want  specs.User
	}{
		{"no user: root and root's groups", makePod(), "", specs.User{UID: 0, GID: 0, AdditionalGids: []uint32{0, 10, 29}}},
		{"image user by name", makePod(), "app", specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{29, 50, 1000}}},
		{"image uid without passwd entry", makePod(), "4242", specs.User{UID: 4242, GID: 0, AdditionalGids: []uint32{0}}},
		{"image uid:gid: kubelet passes only the uid", makePod(), "1000:29", specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{29, 50, 1000}}},
		{"runAsUser over the image", makePod(withSC(&v1.SecurityContext{RunAsUser: ptr(int64(1000))})), "nobody",
			specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{29, 50, 1000}}},
		{"container runAsUser over the pod's", makePod(
			withPodSC(&v1.PodSecurityContext{RunAsUser: ptr(int64(65534))}),
			withSC(&v1.SecurityContext{RunAsUser: ptr(int64(1000))})), "",
			specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{29, 50, 1000}}},
		{"runAsGroup", makePod(withPodSC(&v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(3000))})), "",
			specs.User{UID: 1000, GID: 3000, AdditionalGids: []uint32{29, 50, 3000}}},
		{"runAsGroup with the image user", makePod(withSC(&v1.SecurityContext{RunAsGroup: ptr(int64(3000))})), "app",
			specs.User{UID: 1000, GID: 3000, AdditionalGids: []uint32{29, 50, 3000}}},
		{"supplementalGroups and fsGroup", makePod(withPodSC(&v1.PodSecurityContext{
			RunAsUser: ptr(int64(4242)), SupplementalGroups: []int64{5000, 4000}, FSGroup: ptr(int64(2000))})), "",
			specs.User{UID: 4242, GID: 0, AdditionalGids: []uint32{0, 2000, 4000, 5000}}},
		{"Strict leaves /etc/group out", makePod(withPodSC(&v1.PodSecurityContext{
			RunAsUser: ptr(int64(1000)), SupplementalGroups: []int64{5000},
			SupplementalGroupsPolicy: ptr(v1.SupplementalGroupsPolicyStrict)})), "",
			specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 5000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, tc.pod, crv1.Config{Cmd: []string{"sh"}, User: tc.image})
			if diff := cmp.Diff(tc.want, mustSpec(t, in).Process.User); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknownImageUser(t *testing.T) {
	in := makeInput(t, makePod(), crv1.Config{Cmd: []string{"sh"}, User: "ghost"})
	_, err := build(in, "amd64")
	var ce *ConfigError
	if err == nil || errors.As(err, &ce) {
		t.Errorf("err = %v, want a runtime (CreateContainerError) error", err)
	}
}

func TestRunAsNonRoot(t *testing.T) {
	nonRoot := withPodSC(&v1.PodSecurityContext{RunAsNonRoot: ptr(true)})
	const pod = `"web_default(1234)"`
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		image string
		want  string
	}{
		{"image without user is root", makePod(nonRoot), "",
			"container has runAsNonRoot and image will run as root (pod: " + pod + ", container: app)"},
		{"image uid 0", makePod(nonRoot), "0:0",
			"container has runAsNonRoot and image will run as root (pod: " + pod + ", container: app)"},
		{"image user by name, even a non-root one", makePod(nonRoot), "app",
			"container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: " + pod + ", container: app)"},
		{"explicit runAsUser 0", makePod(nonRoot, withSC(&v1.SecurityContext{RunAsUser: ptr(int64(0))})), "1000",
			"container's runAsUser breaks non-root policy (pod: " + pod + ", container: app)"},
		{"image uid out of range", makePod(nonRoot), "4294967296",
			"container has runAsNonRoot and image has an invalid user id (4294967296). (Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive (pod: " + pod + ", container: app)"},
		{"image uid 1000", makePod(nonRoot), "1000", ""},
		{"runAsUser 1000 over a root image", makePod(nonRoot, withSC(&v1.SecurityContext{RunAsUser: ptr(int64(1000))})), "", ""},
		{"container turns it off", makePod(nonRoot, withSC(&v1.SecurityContext{RunAsNonRoot: ptr(false)})), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, tc.pod, crv1.Config{Cmd: []string{"sh"}, User: tc.image})
			_, err := build(in, "amd64")
			var ce *ConfigError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Spec: %v", err)
			case tc.want != "" && !errors.As(err, &ce):
				t.Fatalf("err = %v, want ConfigError %q", err, tc.want)
			case tc.want != "" && ce.Message != tc.want:
				t.Errorf("message:\n got %s\nwant %s", ce.Message, tc.want)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	caps := func(add, drop []v1.Capability) func(*v1.Pod) {
		return withSC(&v1.SecurityContext{Capabilities: &v1.Capabilities{Add: add, Drop: drop}})
	}
	without := func(list []string, drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(list), func(c string) bool { return slices.Contains(drop, c) })
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"default set", makePod(), defaultCaps},
		{"add with and without CAP_, any case", makePod(caps([]v1.Capability{"NET_ADMIN", "cap_sys_time"}, nil)),
			append(slices.Clone(defaultCaps), "CAP_NET_ADMIN", "CAP_SYS_TIME")},
		{"drop", makePod(caps(nil, []v1.Capability{"NET_RAW", "CAP_MKNOD"})), without(defaultCaps, "CAP_NET_RAW", "CAP_MKNOD")},
		{"drop ALL then add one", makePod(caps([]v1.Capability{"NET_BIND_SERVICE"}, []v1.Capability{"ALL"})), []string{"CAP_NET_BIND_SERVICE"}},
		{"drop all", makePod(caps(nil, []v1.Capability{"all"})), nil},
		{"add ALL drop one", makePod(caps([]v1.Capability{"ALL"}, []v1.Capability{"SYS_ADMIN"})), without(allCaps, "CAP_SYS_ADMIN")},
		{"privileged has all whatever it drops", makePod(withSC(&v1.SecurityContext{Privileged: ptr(true),
			Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}}})), allCaps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustSpec(t, makeInput(t, tc.pod, shImage)).Process.Capabilities
			want := &specs.LinuxCapabilities{Bounding: tc.want, Effective: tc.want, Permitted: tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("privileged and ALL stay within the host's set", func(t *testing.T) {
		host := []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_ADMIN"}
		for _, pod := range []*v1.Pod{
			makePod(withSC(&v1.SecurityContext{Privileged: ptr(true)})),
			makePod(caps([]v1.Capability{"ALL"}, nil)),
		} {
			in := makeInput(t, pod, shImage)
			in.HostCapabilities = host
			if diff := cmp.Diff(host, mustSpec(t, in).Process.Capabilities.Bounding); diff != "" {
				t.Errorf("bounding (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("unknown name", func(t *testing.T) {
		if _, err := build(makeInput(t, makePod(caps([]v1.Capability{"FLY"}, nil)), shImage), "amd64"); err == nil {
			t.Error("an unknown capability was accepted")
		}
	})
}

func TestSecurityFlags(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		sc                       *v1.SecurityContext
		noNewPrivs, readonly     bool
		masked, readonlyPaths    []string
		sysfs, devices, devMount string
	}{
		{name: "defaults", masked: maskedPaths, readonlyPaths: readonlyPaths, sysfs: "ro", devices: "deny-all", devMount: "tmpfs"},
		{name: "allowPrivilegeEscalation false", sc: &v1.SecurityContext{AllowPrivilegeEscalation: ptr(false)},
			noNewPrivs: true, masked: maskedPaths, readonlyPaths: readonlyPaths, sysfs: "ro", devices: "deny-all", devMount: "tmpfs"},
		{name: "allowPrivilegeEscalation true", sc: &v1.SecurityContext{AllowPrivilegeEscalation: ptr(true)},
			masked: maskedPaths, readonlyPaths: readonlyPaths, sysfs: "ro", devices: "deny-all", devMount: "tmpfs"},
		{name: "readOnlyRootFilesystem", sc: &v1.SecurityContext{ReadOnlyRootFilesystem: ptr(true)},
			readonly: true, masked: maskedPaths, readonlyPaths: readonlyPaths, sysfs: "ro", devices: "deny-all", devMount: "tmpfs"},
		{name: "procMount Unmasked", sc: &v1.SecurityContext{ProcMount: ptr(v1.UnmaskedProcMount)}, sysfs: "ro", devices: "deny-all", devMount: "tmpfs"},
		{name: "privileged", sc: &v1.SecurityContext{Privileged: ptr(true)}, sysfs: "rw", devices: "allow-all", devMount: "bind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, makeInput(t, makePod(withSC(tc.sc)), shImage))
			if s.Process.NoNewPrivileges != tc.noNewPrivs {
				t.Errorf("noNewPrivileges = %v, want %v", s.Process.NoNewPrivileges, tc.noNewPrivs)
			}
			if s.Root.Readonly != tc.readonly {
				t.Errorf("root.readonly = %v, want %v", s.Root.Readonly, tc.readonly)
			}
			if diff := cmp.Diff(tc.masked, s.Linux.MaskedPaths); diff != "" {
				t.Errorf("maskedPaths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.readonlyPaths, s.Linux.ReadonlyPaths); diff != "" {
				t.Errorf("readonlyPaths (-want +got):\n%s", diff)
			}
			for _, m := range s.Mounts {
				switch m.Destination {
				case "/sys", "/sys/fs/cgroup":
					if !slices.Contains(m.Options, tc.sysfs) {
						t.Errorf("%s options %v, want %s", m.Destination, m.Options, tc.sysfs)
					}
				case "/dev":
					if m.Type != tc.devMount {
						t.Errorf("/dev type %s, want %s", m.Type, tc.devMount)
					}
				}
			}
			devices := "deny-all"
			if d := s.Linux.Resources.Devices; len(d) == 1 && d[0].Allow {
				devices = "allow-all"
			} else if len(d) == 0 || d[0].Allow || d[0].Access != "rwm" {
				devices = "?"
			}
			if devices != tc.devices {
				t.Errorf("device rules %s (%v), want %s", devices, s.Linux.Resources.Devices, tc.devices)
			}
		})
	}
}

func TestDefaultDevices(t *testing.T) {
	s := mustSpec(t, makeInput(t, makePod(), shImage))
	var got []string
	for _, d := range s.Linux.Resources.Devices {
		rule := fmt.Sprintf("%v %s", d.Allow, d.Access)
		if d.Type != "" {
			rule += " " + d.Type
		}
		if d.Major != nil {
			rule += fmt.Sprintf(" %d:", *d.Major)
			if d.Minor != nil {
				rule += fmt.Sprint(*d.Minor)
			} else {
				rule += "*"
			}
		}
		got = append(got, rule)
	}
	want := []string{
		"false rwm",
		"true rwm c 1:3", "true rwm c 1:5", "true rwm c 1:7", "true rwm c 1:8", "true rwm c 1:9", // null zero full random urandom
		"true rwm c 5:0", "true rwm c 5:1", "true rwm c 5:2", "true rwm c 136:*", // tty console ptmx pts
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("device rules (-want +got):\n%s", diff)
	}
}

func TestSeccomp(t *testing.T) {
	dir := t.TempDir()
	profile := `{"defaultAction":"SCMP_ACT_LOG","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO"}]}`
	if err := os.MkdirAll(filepath.Join(dir, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "profiles", "audit.json"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	localhost := func(name string) *v1.SeccompProfile {
		return &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}
	}
	unconfined := &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		want       string // "default", "none", "localhost"
		configErr  string
		runtimeErr string
	}{
		{name: "unset is RuntimeDefault", pod: makePod(), want: "default"},
		{name: "RuntimeDefault", pod: makePod(withPodSC(&v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}})), want: "default"},
		{name: "pod Unconfined", pod: makePod(withPodSC(&v1.PodSecurityContext{SeccompProfile: unconfined})), want: "none"},
		{name: "container overrides pod", pod: makePod(withPodSC(&v1.PodSecurityContext{SeccompProfile: unconfined}),
			withSC(&v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}})), want: "default"},
		{name: "privileged gets none", pod: makePod(withSC(&v1.SecurityContext{Privileged: ptr(true)})), want: "none"},
		{name: "Localhost", pod: makePod(withSC(&v1.SecurityContext{SeccompProfile: localhost("profiles/audit.json")})), want: "localhost"},
		{name: "Localhost missing", pod: makePod(withSC(&v1.SecurityContext{SeccompProfile: localhost("profiles/none.json")})),
			runtimeErr: `failed to generate seccomp spec opts: cannot load seccomp profile "` + filepath.Join(dir, "profiles/none.json") + `": open ` + filepath.Join(dir, "profiles/none.json") + ": no such file or directory"},
		{name: "Localhost not JSON", pod: makePod(withSC(&v1.SecurityContext{SeccompProfile: localhost("bad.json")})),
			runtimeErr: `failed to generate seccomp spec opts: decoding seccomp profile failed "` + filepath.Join(dir, "bad.json") + `"`},
		{name: "Localhost without a name", pod: makePod(withSC(&v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}})),
			configErr: "localhostProfile must be set if seccompProfile type is Localhost."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, tc.pod, shImage)
			in.SeccompDir = dir
			s, err := build(in, "amd64")
			var ce *ConfigError
			switch {
			case tc.configErr != "":
				if !errors.As(err, &ce) || ce.Message != tc.configErr {
					t.Errorf("err = %v, want ConfigError %q", err, tc.configErr)
				}
				return
			case tc.runtimeErr != "":
				if err == nil || errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tc.runtimeErr) {
					t.Errorf("err = %v, want a runtime error starting %q", err, tc.runtimeErr)
				}
				return
			case err != nil:
				t.Fatalf("Spec: %v", err)
			}
			got := "none"
			switch p := s.Linux.Seccomp; {
			case p == nil:
			case p.DefaultAction == specs.ActErrno && p.DefaultErrnoRet != nil && *p.DefaultErrnoRet == 1:
				got = "default"
			case p.DefaultAction == specs.ActLog && len(p.Syscalls) == 1:
				got = "localhost"
			default:
				got = "?"
			}
			if got != tc.want {
				t.Errorf("seccomp %s, want %s", got, tc.want)
			}
		})
	}
}

// rule is how the profile treats one syscall with no argument filter: "allow",
// "errno N", "filtered" (only with arguments) or "default".
func rule(p *specs.LinuxSeccomp, name string) string {
	filtered := false
	for _, r := range p.Syscalls {
		if !slices.Contains(r.Names, name) {
			continue
		}
		if len(r.Args) > 0 {
			filtered = true
			continue
		}
		if r.Action == specs.ActErrno && r.ErrnoRet != nil {
			return fmt.Sprintf("errno %d", *r.ErrnoRet)
		}
		if r.Action == specs.ActAllow {
			return "allow"
		}
	}
	if filtered {
		return "filtered"
	}
	return "default"
}

func TestDefaultSeccomp(t *testing.T) {
	base := defaultSeccomp("amd64", defaultCaps)
	admin := defaultSeccomp("amd64", append(slices.Clone(defaultCaps), "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_BPF"))
	arm := defaultSeccomp("arm64", defaultCaps)
	for _, tc := range []struct {
		profile *specs.LinuxSeccomp
		name    string
		want    string
	}{
		// What busybox, nginx, postgres and Go programs use.
		{base, "read", "allow"}, {base, "openat", "allow"}, {base, "execve", "allow"},
		{base, "epoll_pwait", "allow"}, {base, "futex", "allow"}, {base, "sendfile", "allow"},
		{base, "shmget", "allow"}, {base, "semop", "allow"}, {base, "sync_file_range", "allow"},
		{base, "arch_prctl", "allow"}, {base, "sched_getaffinity", "allow"}, {base, "pidfd_open", "allow"},
		{base, "chroot", "allow"}, {base, "clone", "filtered"}, {base, "socket", "filtered"},
		{base, "personality", "filtered"},
		// clone3 must fail with ENOSYS so glibc falls back to clone.
		{base, "clone3", "errno 38"},
		// Host-changing syscalls fall to the default EPERM.
		{base, "mount", "default"}, {base, "umount2", "default"}, {base, "pivot_root", "default"},
		{base, "kexec_load", "default"}, {base, "init_module", "default"}, {base, "finit_module", "default"},
		{base, "delete_module", "default"}, {base, "bpf", "default"}, {base, "perf_event_open", "default"},
		{base, "reboot", "default"}, {base, "swapon", "default"}, {base, "swapoff", "default"},
		{base, "setns", "default"}, {base, "unshare", "default"}, {base, "keyctl", "default"},
		{base, "userfaultfd", "default"}, {base, "settimeofday", "default"}, {base, "kcmp", "default"},
		// Capabilities unlock theirs.
		{admin, "mount", "allow"}, {admin, "clone", "allow"}, {admin, "clone3", "allow"},
		{admin, "setns", "allow"}, {admin, "bpf", "allow"}, {admin, "kcmp", "allow"},
		// arm64 has its own and not amd64's.
		{arm, "arm_fadvise64_64", "allow"}, {arm, "arch_prctl", "default"},
	} {
		if got := rule(tc.profile, tc.name); got != tc.want {
			t.Errorf("%s (%v): %s, want %s", tc.name, tc.profile.Architectures, got, tc.want)
		}
	}
	if base.DefaultAction != specs.ActErrno || base.DefaultErrnoRet == nil || *base.DefaultErrnoRet != 1 {
		t.Errorf("default action %s/%v, want SCMP_ACT_ERRNO with EPERM", base.DefaultAction, base.DefaultErrnoRet)
	}
	if diff := cmp.Diff([]specs.Arch{specs.ArchAARCH64, specs.ArchARM}, arm.Architectures); diff != "" {
		t.Errorf("arm64 architectures (-want +got):\n%s", diff)
	}
}

func TestSysctls(t *testing.T) {
	withSysctls := func(host bool, s ...v1.Sysctl) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: s}
			p.Spec.HostNetwork, p.Spec.HostIPC = host, host
		}
	}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		unsafe []string
		want   map[string]string
		err    string
	}{
		{name: "safe", pod: makePod(withSysctls(false, v1.Sysctl{Name: "net.ipv4.ip_local_port_range", Value: "1024 65000"},
			v1.Sysctl{Name: "kernel.shm_rmid_forced", Value: "1"}, v1.Sysctl{Name: "net.ipv4.tcp_rmem", Value: "4096 87380 6291456"})),
			want: map[string]string{"net.ipv4.ip_local_port_range": "1024 65000", "kernel.shm_rmid_forced": "1", "net.ipv4.tcp_rmem": "4096 87380 6291456"}},
		{name: "slash names normalised", pod: makePod(withSysctls(false, v1.Sysctl{Name: "net/ipv4/tcp_syncookies", Value: "1"})),
			want: map[string]string{"net.ipv4.tcp_syncookies": "1"}},
		{name: "unsafe", pod: makePod(withSysctls(false, v1.Sysctl{Name: "net.core.somaxconn", Value: "1024"})),
			err: `forbidden sysctl: "net.core.somaxconn" not allowlisted`},
		{name: "unsafe but allowed by the node", pod: makePod(withSysctls(false, v1.Sysctl{Name: "net.core.somaxconn", Value: "1024"})),
			unsafe: []string{"net.core.*"}, want: map[string]string{"net.core.somaxconn": "1024"}},
		{name: "net with hostNetwork", pod: makePod(withSysctls(true, v1.Sysctl{Name: "net.ipv4.tcp_syncookies", Value: "1"})),
			err: `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled`},
		{name: "ipc with hostIPC", pod: makePod(withSysctls(true, v1.Sysctl{Name: "kernel.shm_rmid_forced", Value: "1"})),
			err: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc enabled`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, tc.pod, shImage)
			in.AllowedUnsafeSysctls = tc.unsafe
			s, err := build(in, "amd64")
			var ce *ConfigError
			if tc.err != "" {
				if !errors.As(err, &ce) || ce.Message != tc.err {
					t.Errorf("err = %v, want ConfigError %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Spec: %v", err)
			}
			if diff := cmp.Diff(tc.want, s.Linux.Sysctl); diff != "" {
				t.Errorf("sysctl (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMounts(t *testing.T) {
	in := makeInput(t, makePod(), shImage)
	in.Mounts = []Mount{
		{Source: "/v/data-sub", Destination: "/data/sub"},
		{Source: "/p/hosts", Destination: "/etc/hosts", File: true},
		{Source: "/v/data", Destination: "/data", ReadOnly: true},
		{Source: "/p/shm", Destination: "/dev/shm"},
		{Source: "/p/termination-log", Destination: "/dev/termination-log", File: true},
		{Source: "/v/image", Destination: "/image", ReadOnly: true, NoExec: true},
	}
	var got []string
	for _, m := range mustSpec(t, in).Mounts {
		got = append(got, m.Destination+" "+m.Type+" "+strings.Join(m.Options, ","))
	}
	want := []string{
		"/proc proc nosuid,noexec,nodev",
		"/dev tmpfs nosuid,strictatime,mode=755,size=65536k",
		"/dev/pts devpts nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5",
		"/dev/mqueue mqueue nosuid,noexec,nodev",
		"/sys sysfs nosuid,noexec,nodev,ro",
		"/sys/fs/cgroup cgroup nosuid,noexec,nodev,relatime,ro",
		// By depth, parents first; equal depths keep their order.
		"/data bind rbind,rprivate,ro",
		"/image bind rbind,rprivate,ro,noexec",
		"/data/sub bind rbind,rprivate,rw",
		"/etc/hosts bind rbind,rprivate,rw",
		"/dev/shm bind rbind,rprivate,rw",
		"/dev/termination-log bind rbind,rprivate,rw",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	t.Run("relative destination", func(t *testing.T) {
		in := makeInput(t, makePod(), shImage)
		in.Mounts = []Mount{{Source: "/v/data", Destination: "data"}}
		if _, err := build(in, "amd64"); err == nil {
			t.Error("a relative mount destination was accepted")
		}
	})
	t.Run("default /dev/shm", func(t *testing.T) {
		s := mustSpec(t, makeInput(t, makePod(), shImage))
		if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool {
			return m.Destination == "/dev/shm" && m.Type == "tmpfs" && slices.Contains(m.Options, "size=65536k")
		}) {
			t.Errorf("no 64m tmpfs on /dev/shm in %v", s.Mounts)
		}
	})
}

func TestNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   func(*Input)
		want     []specs.LinuxNamespace
		hostname string
	}{
		{name: "pod namespaces", change: func(*Input) {}, want: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace, Path: "/proc/10/ns/ipc"}, {Type: specs.UTSNamespace, Path: "/proc/10/ns/uts"},
			{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: "/run/netns/pod"},
		}},
		{name: "hostNetwork, shared PID, new UTS, cgroup v2", change: func(in *Input) {
			in.NetNS, in.PIDNS, in.UTSNS, in.Cgroup2 = "", "/proc/10/ns/pid", "", true
		}, hostname: "web", want: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace, Path: "/proc/10/ns/pid"}, {Type: specs.IPCNamespace, Path: "/proc/10/ns/ipc"}, {Type: specs.UTSNamespace},
			{Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
		}},
		{name: "hostPID and hostIPC keep the node's", change: func(in *Input) {
			in.Pod.Spec.HostPID, in.Pod.Spec.HostIPC = true, true
			in.PIDNS = "/proc/10/ns/pid" // ignored: the pod asked for the node's
		}, want: []specs.LinuxNamespace{
			{Type: specs.UTSNamespace, Path: "/proc/10/ns/uts"}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: "/run/netns/pod"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, makePod(), shImage)
			tc.change(&in)
			s := mustSpec(t, in)
			if diff := cmp.Diff(tc.want, s.Linux.Namespaces); diff != "" {
				t.Errorf("namespaces (-want +got):\n%s", diff)
			}
			if s.Hostname != tc.hostname {
				t.Errorf("hostname %q, want %q", s.Hostname, tc.hostname)
			}
		})
	}
}

func TestUserNamespaceRefused(t *testing.T) {
	in := makeInput(t, makePod(func(p *v1.Pod) { p.Spec.HostUsers = ptr(false) }), shImage)
	_, err := build(in, "amd64")
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "hostUsers: false") {
		t.Errorf("err = %v, want a ConfigError about hostUsers", err)
	}
}

// TestWellFormed checks a full spec survives JSON as runc reads it, with the fields
// runc requires.
func TestWellFormed(t *testing.T) {
	pod := makePod(
		withPodSC(&v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), FSGroup: ptr(int64(2000)),
			Sysctls: []v1.Sysctl{{Name: "net.ipv4.ping_group_range", Value: "0 2147483647"}}}),
		withSC(&v1.SecurityContext{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true)}),
		withResources(resources("250m", "64Mi", "500m", "128Mi")),
	)
	in := makeInput(t, pod, crv1.Config{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx", "-g", "daemon off;"}, Env: []string{"NGINX_VERSION=1.25"}})
	in.Mounts = []Mount{{Source: "/p/hosts", Destination: "/etc/hosts", File: true}}
	in.PidsLimit = 4096
	in.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 4096}}
	s, err := Spec(in)
	if err != nil {
		t.Fatalf("Spec: %v", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var back specs.Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if diff := cmp.Diff(s, &back); diff != "" {
		t.Errorf("JSON round trip (-spec +decoded):\n%s", diff)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ociVersion", "process", "root", "mounts", "linux", "annotations"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("no %q in %s", key, b)
		}
	}
	if back.Version == "" || !filepath.IsAbs(back.Root.Path) || len(back.Process.Args) == 0 || !filepath.IsAbs(back.Process.Cwd) {
		t.Errorf("ociVersion %q, root %q, args %q, cwd %q: runc needs all of them", back.Version, back.Root.Path, back.Process.Args, back.Process.Cwd)
	}
	for _, m := range back.Mounts {
		if !filepath.IsAbs(m.Destination) || m.Type == "" || m.Source == "" {
			t.Errorf("mount %+v: runc needs an absolute destination, a type and a source", m)
		}
	}
	valid := []specs.LinuxNamespaceType{specs.PIDNamespace, specs.NetworkNamespace, specs.MountNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.UserNamespace, specs.CgroupNamespace}
	seen := map[specs.LinuxNamespaceType]bool{}
	for _, ns := range back.Linux.Namespaces {
		if !slices.Contains(valid, ns.Type) || seen[ns.Type] {
			t.Errorf("namespace %+v unknown or repeated", ns)
		}
		seen[ns.Type] = true
	}
	for _, c := range back.Process.Capabilities.Bounding {
		if !slices.Contains(allCaps, c) {
			t.Errorf("capability %q unknown to runc", c)
		}
	}
	if back.Linux.Seccomp == nil || back.Linux.Seccomp.DefaultAction == "" {
		t.Errorf("seccomp %+v incomplete", back.Linux.Seccomp)
	}
	for _, r := range back.Linux.Seccomp.Syscalls {
		if len(r.Names) == 0 || r.Action == "" {
			t.Errorf("seccomp rule %+v needs names and an action", r)
		}
	}
	wantAnn := map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "1234", "io.kubernetes.container.name": "app"}
	for k, v := range wantAnn {
		if back.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, back.Annotations[k], v)
		}
	}
	if back.Process.OOMScoreAdj == nil || *back.Process.OOMScoreAdj != 1000-1000*(64<<20)/8_000_000_000 {
		t.Errorf("oomScoreAdj %v", back.Process.OOMScoreAdj)
	}
	if diff := cmp.Diff(in.Rlimits, back.Process.Rlimits); diff != "" {
		t.Errorf("rlimits (-want +got):\n%s", diff)
	}
	if back.Process.Terminal || back.Process.ApparmorProfile != "" {
		t.Errorf("terminal %v, apparmor %q: want false and none", back.Process.Terminal, back.Process.ApparmorProfile)
	}
}

func TestCapNames(t *testing.T) {
	// containerd's default set, as CapEff shows it in a container.
	got := capNames(0x00000000a80425fb)
	want := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
		"CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_CHROOT", "CAP_MKNOD",
		"CAP_AUDIT_WRITE", "CAP_SETFCAP"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capNames (-want +got):\n%s", diff)
	}
	if _, err := HostCapabilities(); err != nil {
		t.Fatal(err)
	}
}
