package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	admissionapi "k8s.io/pod-security-admission/admission/api"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/cluster"
	"github.com/tranche/tranche/internal/controller/hpa"
	"github.com/tranche/tranche/internal/controller/nodelifecycle"
	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/leader"
	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/memtune"
	"github.com/tranche/tranche/internal/podsecurity"
	"github.com/tranche/tranche/internal/server"
)

func serverCmd() *cobra.Command {
	var cfg server.Config
	var etcdServers, extra, logLevel string
	var net serviceNetFlags
	var psa podSecurityFlags
	var elect leaderElectFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the API server and the control-plane controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if etcdServers != "" {
				cfg.EtcdServers = strings.Split(etcdServers, ",")
			}
			if extra != "" {
				cfg.ExtraListen = strings.Split(extra, ",")
			}
			var err error
			if cfg.Logger, err = logging.New(logLevel, os.Stderr); err != nil {
				return err
			}
			if err := net.apply(&cfg); err != nil {
				return err
			}
			if err := psa.apply(&cfg); err != nil {
				return err
			}
			if err := elect.apply(cmd, &cfg); err != nil {
				return err
			}
			return server.Run(cmd.Context(), cfg, memtune.ReleaseWhenReady(cmd.Context(), cfg.Logger))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", cluster.DefaultDataDir(cluster.DefaultName), "directory for the PKI, the kubeconfig and the embedded etcd")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "HTTPS address of the API server")
	f.StringVar(&extra, "extra-listen", "", "further HTTPS addresses, comma-separated (e.g. the cluster network listener)")
	f.StringVar(&etcdServers, "etcd-servers", "", "external etcd client URLs, comma-separated; empty runs an embedded etcd")
	f.DurationVar(&cfg.CompactInterval, "compact-interval", 0, "how often etcd history is compacted (default 5m)")
	f.StringVar(&logLevel, "log-level", "info", logging.Levels)
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", apiserver.DefaultRequestTimeout,
		"how long a request that is not long-running may take before the server answers 504 Timeout (a shorter ?timeout= of the request wins)")
	registerHPASyncPeriod(cmd, &cfg)
	registerNodeMonitorGracePeriod(cmd, &cfg)
	cfg.ClusterSigningDuration = server.DefaultClusterSigningDuration
	f.Var((*positiveDuration)(&cfg.ClusterSigningDuration), "cluster-signing-duration",
		"the max length of duration signed certificates will be given; individual CSRs may request shorter certs by setting spec.expirationSeconds "+
			"(kube-controller-manager's flag: the agents' certificates, requested through CertificateSigningRequests, are rotated at 70-90% of it)")
	registerInFlightLimits(cmd, &cfg)
	net.register(cmd)
	psa.register(cmd)
	elect.register(cmd)
	return cmd
}

// leaderElectFlags are kube-controller-manager's leader election flags. Election is on
// by default with --etcd-servers (other servers may share the store) and off with the
// embedded etcd, which no other server can reach.
type leaderElectFlags struct {
	enabled bool
	timing  leader.Timing
}

func (l *leaderElectFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&l.enabled, "leader-elect", false,
		"run the controller manager and the scheduler only while this server holds their leases (kube-system/kube-controller-manager, kube-system/kube-scheduler); default true with --etcd-servers, false with the embedded etcd")
	f.DurationVar(&l.timing.LeaseDuration, "leader-elect-lease-duration", leader.DefaultLeaseDuration,
		"how long other servers wait after the leader's last renewal before taking its lease over")
	f.DurationVar(&l.timing.RenewDeadline, "leader-elect-renew-deadline", leader.DefaultRenewDeadline,
		"how long the leader retries renewing before it stops its controllers; less than the lease duration")
	f.DurationVar(&l.timing.RetryPeriod, "leader-elect-retry-period", leader.DefaultRetryPeriod,
		"the interval between attempts to acquire or renew a lease")
}

func (l *leaderElectFlags) apply(cmd *cobra.Command, cfg *server.Config) error {
	enabled := l.enabled
	if !cmd.Flags().Changed("leader-elect") {
		enabled = len(cfg.EtcdServers) > 0
	}
	if enabled {
		if err := l.timing.Validate(); err != nil {
			return err
		}
	}
	cfg.LeaderElection = server.LeaderElection{Enabled: enabled, Timing: l.timing}
	return nil
}

// registerHPASyncPeriod adds the flag `server` and `up` share with kube-controller-manager.
func registerHPASyncPeriod(cmd *cobra.Command, cfg *server.Config) {
	cmd.Flags().DurationVar(&cfg.HPASyncPeriod, "horizontal-pod-autoscaler-sync-period", hpa.DefaultSyncPeriod,
		"how often each HorizontalPodAutoscaler's metrics are read and its target resized")
}

// registerNodeMonitorGracePeriod adds the flag `server` and `up` share with
// kube-controller-manager: how long a node may stop renewing its Lease before it is
// Unknown, tainted unreachable and its pods marked not Ready.
// A period that is not positive is refused when the flag is parsed.
func registerNodeMonitorGracePeriod(cmd *cobra.Command, cfg *server.Config) {
	cfg.NodeMonitorGracePeriod = nodelifecycle.DefaultGracePeriod
	cmd.Flags().Var((*positiveDuration)(&cfg.NodeMonitorGracePeriod), "node-monitor-grace-period",
		"Amount of time which we allow running Node to be unresponsive before marking it unhealthy")
}

// positiveDuration is a duration flag that refuses zero and negative values.
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }
func (d *positiveDuration) Type() string   { return "duration" }

func (d *positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("must be positive, got %s", v)
	}
	*d = positiveDuration(v)
	return nil
}

// registerInFlightLimits adds the flags `server` and `up` share with kube-apiserver
// that bound the requests served at once.
func registerInFlightLimits(cmd *cobra.Command, cfg *server.Config) {
	cmd.Flags().IntVar(&cfg.MaxRequestsInFlight, "max-requests-inflight", apiserver.DefaultMaxRequestsInFlight,
		"the maximum number of non-mutating requests in flight at a given time; over it the server answers 429 (0 means no limit)")
	cmd.Flags().IntVar(&cfg.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", apiserver.DefaultMaxMutatingRequestsInFlight,
		"the maximum number of mutating requests in flight at a given time; over it the server answers 429 (0 means no limit)")
}

// podSecurityFlags are the Pod Security Admission flags `server` and `up` share: the
// cluster's default levels and the exemptions (kube-apiserver reads them from its
// PodSecurityConfiguration).
type podSecurityFlags struct {
	enforce, audit, warn                                string
	exemptNamespaces, exemptUsers, exemptRuntimeClasses []string
}

func (p *podSecurityFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	levels := "privileged, baseline or restricted"
	f.StringVar(&p.enforce, "pod-security-enforce", "privileged", "Pod Security level enforced in namespaces without a pod-security.kubernetes.io/enforce label: "+levels)
	f.StringVar(&p.audit, "pod-security-audit", "privileged", "Pod Security level audited (logged) in namespaces without a pod-security.kubernetes.io/audit label: "+levels)
	f.StringVar(&p.warn, "pod-security-warn", "privileged", "Pod Security level warned about in namespaces without a pod-security.kubernetes.io/warn label: "+levels)
	f.StringSliceVar(&p.exemptNamespaces, "pod-security-exempt-namespaces", []string{"kube-system"}, "namespaces Pod Security never evaluates")
	f.StringSliceVar(&p.exemptUsers, "pod-security-exempt-users", nil, "users whose requests Pod Security never evaluates")
	f.StringSliceVar(&p.exemptRuntimeClasses, "pod-security-exempt-runtime-classes", nil, "runtime classes whose pods Pod Security never evaluates")
}

func (p *podSecurityFlags) apply(cfg *server.Config) error {
	for _, l := range []struct{ flag, value string }{{"enforce", p.enforce}, {"audit", p.audit}, {"warn", p.warn}} {
		if _, err := psapi.ParseLevel(l.value); err != nil {
			return fmt.Errorf("--pod-security-%s %q: %w", l.flag, l.value, err)
		}
	}
	cfg.PodSecurity = podsecurity.Config{
		Defaults: admissionapi.PodSecurityDefaults{Enforce: p.enforce, Audit: p.audit, Warn: p.warn},
		Exemptions: admissionapi.PodSecurityExemptions{Namespaces: p.exemptNamespaces, Usernames: p.exemptUsers,
			RuntimeClasses: p.exemptRuntimeClasses},
	}
	return nil
}

// serviceNetFlags are the address flags `server` and `up` share.
type serviceNetFlags struct {
	serviceCIDR, nodePorts, advertise, clusterCIDR, lbPool string
}

func (n *serviceNetFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&n.serviceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "CIDR ClusterIPs are allocated from")
	f.StringVar(&n.nodePorts, "service-node-port-range", "30000-32767", "range NodePorts are allocated from")
	f.StringVar(&n.advertise, "advertise-address", "10.240.0.1", "address the kubernetes Service's endpoints point at")
	f.StringVar(&n.clusterCIDR, "cluster-cidr", "10.244.0.0/16", "pod range; each node gets a /24 of it")
	f.StringVar(&n.lbPool, "loadbalancer-pool", servicelb.DefaultPool,
		"addresses for LoadBalancer Services: comma-separated addresses, CIDRs and FIRST-LAST ranges; \"nodes\" for the nodes' own addresses (as k3s's ServiceLB, on machines); empty leaves them to another controller")
}

func (n *serviceNetFlags) apply(cfg *server.Config) error {
	p, err := netip.ParsePrefix(n.serviceCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		return fmt.Errorf("--service-cluster-ip-range %q: want an IPv4 CIDR of at least 16 addresses (e.g. 10.96.0.0/12)", n.serviceCIDR)
	}
	cfg.ServiceCIDR = p.Masked()
	if cfg.NodePorts, err = allocator.ParsePortRange(n.nodePorts); err != nil {
		return fmt.Errorf("--service-node-port-range: %w", err)
	}
	c, err := netip.ParsePrefix(n.clusterCIDR)
	if err != nil || !c.Addr().Is4() || c.Bits() > 24 {
		return fmt.Errorf("--cluster-cidr %q: want an IPv4 CIDR of /24 or larger (e.g. 10.244.0.0/16)", n.clusterCIDR)
	}
	cfg.ClusterCIDR = c.Masked()
	if cfg.LoadBalancerPool, err = servicelb.ParsePool(n.lbPool); err != nil {
		return fmt.Errorf("--loadbalancer-pool: %w", err)
	}
	if cfg.AdvertiseAddress, err = netip.ParseAddr(n.advertise); err != nil {
		return fmt.Errorf("--advertise-address %q: %w", n.advertise, err)
	}
	return nil
}
