package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/tranche/tranche/internal/agent/ocispec"
	"github.com/tranche/tranche/internal/agent/podfiles"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/netns"
)

// sandboxRecord is what survives an agent restart about one pod's sandbox: its network
// namespace and address, so that the address stays the pod's and Cleanup can find
// sandboxes of pods the agent no longer knows.
type sandboxRecord struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	NetNS     string `json:"netns"`
	IP        string `json:"ip"`
}

// stateFile holds the sandbox records, below RootDir.
const stateFile = "sandboxes.json"

// sandboxName is a pod's network namespace: the cluster prefix, "p-" and the first 12
// hex digits of its UID (unique enough on one machine, and short for `ip netns`).
func sandboxName(prefix string, uid types.UID) (string, error) {
	hex := strings.ReplaceAll(string(uid), "-", "")
	if hex == "" || strings.ContainsAny(hex, "/\x00.") {
		return "", fmt.Errorf("pod UID %q cannot name a sandbox", uid)
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return prefix + "p-" + hex, nil
}

// loadRecords reads the persisted sandboxes and reserves their addresses; a missing file
// means none.
func (m *Manager) loadRecords() error {
	data, err := os.ReadFile(filepath.Join(m.cfg.RootDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading sandbox state: %w", err)
	}
	recs := map[types.UID]sandboxRecord{}
	if err := json.Unmarshal(data, &recs); err != nil {
		return fmt.Errorf("reading sandbox state %s: %w", filepath.Join(m.cfg.RootDir, stateFile), err)
	}
	for uid, r := range recs {
		ip, err := netip.ParseAddr(r.IP)
		if err != nil || m.ips.Reserve(ip) != nil {
			m.cfg.Logger.Warn("dropping sandbox record with an unusable address", "pod", r.Namespace+"/"+r.Name, "ip", r.IP)
			continue
		}
		m.records[uid] = r
	}
	return nil
}

// saveRecords writes the records atomically; m.mu must be held.
func (m *Manager) saveRecords() error {
	data, err := json.MarshalIndent(m.records, "", "  ")
	if err != nil {
		return fmt.Errorf("writing sandbox state: %w", err)
	}
	p := filepath.Join(m.cfg.RootDir, stateFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing sandbox state: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("writing sandbox state: %w", err)
	}
	return nil
}

// podDir is the directory of one pod's files.
func (m *Manager) podDir(uid types.UID) string {
	return filepath.Join(m.cfg.RootDir, "pods", string(uid))
}

// ensureSandbox gives ps its network namespace, address and /etc files. A namespace left
// from before an agent restart is rebuilt, keeping the pod's address. The network
// namespace and its link to the node are made in the background while the rest of the
// sandbox is made and the containers' bundles are written: awaitNetwork waits for them
// before a process runs in the pod and before SyncPod returns. ps.mu is held.
func (m *Manager) ensureSandbox(ps *podState) error {
	if ps.sandboxReady {
		return nil
	}
	pod := ps.pod
	if pod.Spec.HostNetwork {
		return m.ensureHostNetwork(ps)
	}
	t := newPhases(m.cfg.Clock)
	name, err := sandboxName(m.cfg.Topology.Prefix, pod.UID)
	if err != nil {
		return err
	}
	hostname, _, err := podfiles.Hostname(pod, m.cfg.ClusterDomain)
	if err != nil {
		return err
	}
	m.mu.Lock()
	rec, ok := m.records[pod.UID]
	if !ok {
		ip, err := m.ips.Allocate()
		if err != nil {
			m.mu.Unlock()
			return fmt.Errorf("allocating an address for pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		rec = sandboxRecord{Namespace: pod.Namespace, Name: pod.Name, NetNS: name, IP: ip.String()}
		m.records[pod.UID] = rec
		if err := m.saveRecords(); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	m.mu.Unlock()
	t.mark("address")
	ip, err := netip.ParseAddr(rec.IP)
	if err != nil {
		return fmt.Errorf("pod %s/%s: bad recorded address %q: %w", pod.Namespace, pod.Name, rec.IP, err)
	}
	if netns.Exists(rec.NetNS) {
		if ps.adopted {
			return m.adoptSandbox(ps, rec.NetNS, ip)
		}
		if err := m.deleteNetNS(rec.NetNS); err != nil {
			return err
		}
	}
	net := &pendingNetwork{done: make(chan struct{}), phases: t}
	go func() {
		defer close(net.done)
		n := newPhases(m.cfg.Clock)
		if err := netns.Create(rec.NetNS); err != nil {
			net.err = fmt.Errorf("creating the sandbox of pod %s/%s: %w", pod.Namespace, pod.Name, err)
			return
		}
		n.mark("netns")
		if _, err := clusternet.AttachPod(m.cfg.Topology, m.cfg.NodeName, rec.NetNS, ip); err != nil {
			_ = m.deleteNetNS(rec.NetNS)
			net.err = fmt.Errorf("creating the sandbox of pod %s/%s: %w", pod.Namespace, pod.Name, err)
			return
		}
		n.mark("link")
		net.took = n.marks
	}()
	ps.network = net
	if err := m.writeEtc(pod, ip, hostname); err != nil {
		m.awaitNetwork(ps)
		return fmt.Errorf("writing /etc files of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	t.mark("etc")
	if err := m.podNamespaces(ps, hostname); err != nil {
		m.awaitNetwork(ps)
		return err
	}
	t.mark("namespaces")
	ps.netns, ps.ip, ps.hostname, ps.sandboxReady = rec.NetNS, ip, hostname, true
	return nil
}

// pendingNetwork is a pod's network namespace and link being made: done closes when
// they are, err says why they could not be; took times the steps and phases the rest
// of the sandbox, for the debug line.
type pendingNetwork struct {
	done   chan struct{}
	err    error
	took   []any
	phases *phases
}

// awaitNetwork waits until the pod's network namespace and link are made, if they
// are being made; when they could not be, the sandbox is not ready and the error says
// why, to every caller until the next sync makes it again. ps.mu is held.
func (m *Manager) awaitNetwork(ps *podState) error {
	net := ps.network
	if net == nil {
		return nil
	}
	select {
	case <-net.done:
		if net.err != nil {
			return net.err
		}
	default:
	}
	t := net.phases
	t.mark("rest") // the sandbox's other steps and the bundles, until now
	<-net.done
	t.mark("waited")
	if net.err != nil {
		ps.sandboxReady = false
		return net.err
	}
	ps.network = nil
	m.cfg.Logger.Debug("pod sandbox created", append(append([]any{"pod", podID(ps.pod)}, net.took...), t.attrs()...)...)
	return nil
}

// adoptSandbox keeps the sandbox an earlier agent made for a pod whose containers it
// adopted: their network, IPC and UTS namespaces and /etc files are in use. ps.mu is
// held.
func (m *Manager) adoptSandbox(ps *podState, name string, ip netip.Addr) error {
	pod := ps.pod
	hostname, _, err := podfiles.Hostname(pod, m.cfg.ClusterDomain)
	if err != nil {
		return err
	}
	dir := filepath.Join(m.podDir(pod.UID), "ns")
	ps.ipcNS, ps.utsNS = filepath.Join(dir, "ipc"), filepath.Join(dir, "uts")
	ps.netns, ps.ip, ps.hostname, ps.sandboxReady = name, ip, hostname, true
	return nil
}

// podNamespaces gives the pod its IPC and UTS namespaces (the hostname set in the
// latter) and its cgroup, with the pod-level limits kubelet sets. ps.mu is held.
func (m *Manager) podNamespaces(ps *podState, hostname string) error {
	pod := ps.pod
	dir := filepath.Join(m.podDir(pod.UID), "ns")
	_ = runc.RemovePodNamespaces(dir)
	ipc, uts, err := runc.CreatePodNamespaces(dir, hostname)
	if err != nil {
		return fmt.Errorf("creating the IPC and UTS namespaces of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	res := ocispec.PodResources(pod)
	if n := m.cfg.PodPidsLimit; n > 0 {
		res.Pids = &specs.LinuxPids{Limit: &n}
	}
	if err := runc.EnsurePod(m.podCgroup(pod.UID), res); err != nil {
		return fmt.Errorf("creating the cgroup of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ps.ipcNS, ps.utsNS = ipc, uts
	return nil
}

// podCgroup is the pod's cgroup path (cgroupfs layout): below the node's, which is
// unique to the cluster's namespace prefix and the node.
func (m *Manager) podCgroup(uid types.UID) string {
	return m.nodeCgroup() + "/pod" + string(uid)
}

// nodeCgroup is the node's cgroup, the parent of its pods'.
func (m *Manager) nodeCgroup() string {
	return runc.NodeCgroup(m.cfg.Topology.NodeNamespace(m.cfg.NodeName))
}

// ensureHostNetwork gives a hostNetwork pod the node's own network, as kubelet does:
// no namespace, veth or address of its own, the node's InternalIP as pod IP, the node's
// name as hostname, and a copy of the node's /etc/hosts. Nothing is recorded: there is
// nothing to release or clean up but the pod's files. ps.mu is held.
func (m *Manager) ensureHostNetwork(ps *podState) error {
	pod := ps.pod
	nodeNS := m.hostNetNS()
	if !netns.Exists(nodeNS) {
		return fmt.Errorf("pod %s/%s uses the host network, but the node's network namespace %q does not exist", pod.Namespace, pod.Name, nodeNS)
	}
	if !m.node.Underlay.IsValid() {
		return fmt.Errorf("pod %s/%s uses the host network, but node %q has no address", pod.Namespace, pod.Name, m.cfg.NodeName)
	}
	hostname := m.cfg.NodeName
	if err := m.writeEtc(pod, m.node.Underlay, hostname); err != nil {
		return fmt.Errorf("writing /etc files of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := m.podNamespaces(ps, hostname); err != nil {
		return err
	}
	ps.netns, ps.ip, ps.hostname, ps.sandboxReady = nodeNS, m.node.Underlay, hostname, true
	return nil
}

// hostNetNS is the network namespace hostNetwork pods run in: Config.NodeNS, or the
// node's namespace in the cluster topology.
func (m *Manager) hostNetNS() string {
	if m.cfg.NodeNS != "" {
		return m.cfg.NodeNS
	}
	return m.cfg.Topology.NodeNamespace(m.cfg.NodeName)
}

// writeEtc writes the pod's hosts, resolv.conf and hostname below its directory.
func (m *Manager) writeEtc(pod *v1.Pod, ip netip.Addr, hostname string) error {
	dir := filepath.Join(m.podDir(pod.UID), "etc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var hosts []byte
	if pod.Spec.HostNetwork {
		nodeHosts, err := os.ReadFile(m.cfg.HostHostsFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		hosts = podfiles.HostNetworkHosts(pod, nodeHosts)
	} else {
		var err error
		if hosts, err = podfiles.Hosts(pod, []string{ip.String()}, m.cfg.ClusterDomain); err != nil {
			return err
		}
	}
	hostResolv, err := os.ReadFile(m.cfg.HostResolvConf)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	resolv, err := podfiles.ResolvConf(pod, m.cfg.ClusterDNS, m.cfg.ClusterDomain, hostResolv)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"hosts": hosts, "resolv.conf": resolv, "hostname": []byte(hostname + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// deleteNetNS kills whatever still runs in a pod namespace, detaches it from the node
// and deletes it.
func (m *Manager) deleteNetNS(name string) error {
	killNetNSProcesses(name)
	var errs []error
	if err := clusternet.DetachPod(m.cfg.Topology, m.cfg.NodeName, name); err != nil {
		errs = append(errs, err)
	}
	if netns.Exists(name) {
		errs = append(errs, netns.Delete(name))
	}
	return errors.Join(errs...)
}

// removeSandbox deletes the pod's namespace, releases its address and removes its
// files except the container logs, which stay for `kubectl logs` until garbage
// collection.
func (m *Manager) removeSandbox(uid types.UID) error {
	m.mu.Lock()
	rec, ok := m.records[uid]
	m.mu.Unlock()
	var errs []error
	if ok {
		errs = append(errs, m.deleteNetNS(rec.NetNS))
	}
	dir := m.podDir(uid)
	errs = append(errs, runc.RemovePodNamespaces(filepath.Join(dir, "ns")))
	errs = append(errs, runc.RemovePod(m.podCgroup(uid)))
	errs = append(errs, os.RemoveAll(filepath.Join(dir, "etc")))
	if cs, err := os.ReadDir(filepath.Join(dir, "containers")); err == nil {
		for _, c := range cs {
			pruneTerminationLogs(filepath.Join(dir, "containers", c.Name()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing the sandbox of pod %s: %w", uid, err)
	}
	if ok {
		m.mu.Lock()
		if ip, err := netip.ParseAddr(rec.IP); err == nil {
			m.ips.Release(ip)
		}
		delete(m.records, uid)
		err := m.saveRecords()
		m.mu.Unlock()
		return err
	}
	return nil
}

// killNetNSProcesses SIGKILLs every process whose network namespace is the named one:
// after an agent crash nothing else knows them. Processes that cannot be inspected are
// skipped.
func killNetNSProcesses(name string) {
	var target unix.Stat_t
	if err := unix.Stat(netns.Path(name), &target); err != nil {
		return
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if st.Dev == target.Dev && st.Ino == target.Ino {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
