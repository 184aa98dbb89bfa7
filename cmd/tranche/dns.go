package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/dns"
	"github.com/tranche/tranche/internal/logging"
)

func dnsCmd() *cobra.Command {
	var cfg dns.RunConfig
	var upstreams []string
	var ttl uint32
	var logLevel string
	var serviceCIDRs, podCIDRs []string
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Serve the cluster's DNS: the Kubernetes DNS specification for the cluster zone, other names forwarded",
		Long: "Serve the cluster DNS (kube-system/tranche-dns behind the kube-dns Service). In a pod it reads the API\n" +
			"with its service account; elsewhere give --kubeconfig. Names outside the cluster domain go to --upstream,\n" +
			"except the reverse names of the service and pod ranges, which only the cluster can answer.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, u := range upstreams {
				for _, s := range strings.Split(u, ",") {
					if s = strings.TrimSpace(s); s == "" {
						continue
					}
					if _, err := netip.ParseAddrPort(s); err != nil {
						if a, err2 := netip.ParseAddr(s); err2 == nil {
							s = netip.AddrPortFrom(a, 53).String()
						} else {
							return fmt.Errorf("--upstream %q: want IP or IP:port", s)
						}
					}
					cfg.Upstreams = append(cfg.Upstreams, s)
				}
			}
			for _, r := range []struct {
				flag  string
				cidrs []string
			}{{"--service-cluster-ip-range", serviceCIDRs}, {"--cluster-cidr", podCIDRs}} {
				for _, c := range r.cidrs {
					if c = strings.TrimSpace(c); c == "" {
						continue
					}
					p, err := netip.ParsePrefix(c)
					if err != nil || p.Addr().Is4In6() {
						return fmt.Errorf("%s %q: want an IPv4 or IPv6 CIDR (e.g. 10.96.0.0/12)", r.flag, c)
					}
					cfg.ReverseCIDRs = append(cfg.ReverseCIDRs, p.Masked())
				}
			}
			if ttl == 0 {
				return fmt.Errorf("--ttl must be at least 1 second")
			}
			cfg.TTL = ttl
			log, err := logging.New(logLevel, os.Stderr)
			if err != nil {
				return err
			}
			cfg.Logger = log.With("component", "dns")
			return dns.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig to read the API with (default: the pod's service account)")
	f.StringVar(&cfg.APIServer, "api-server", "", "API server URL (default: from the kubeconfig, or KUBERNETES_SERVICE_HOST/PORT in a pod)")
	f.StringVar(&cfg.Listen, "listen", ":53", "UDP and TCP address to answer on")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", ":9153", "address of /metrics, /ready and /health (empty: none)")
	f.StringVar(&cfg.Zone, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	f.StringSliceVar(&upstreams, "upstream", nil, "resolvers for other names, IP[:port], repeatable or comma-separated (none: such names are refused)")
	f.Uint32Var(&ttl, "ttl", 5, "TTL in seconds of the cluster zone's records and negative answers")
	f.IntVar(&cfg.CacheEntries, "cache-size", 10000, "most answers from upstreams kept")
	f.StringSliceVar(&serviceCIDRs, "service-cluster-ip-range", []string{"10.96.0.0/12"},
		"the cluster's ClusterIP ranges, comma-separated: their reverse zones are answered here, never forwarded (empty: none)")
	f.StringSliceVar(&podCIDRs, "cluster-cidr", []string{"10.244.0.0/16"},
		"the cluster's pod ranges, comma-separated: their reverse zones are answered here, never forwarded (empty: none)")
	f.BoolVar(&cfg.NoAutopath, "no-autopath", false, "do not answer pods' search-expanded names on the first query")
	f.StringVar(&logLevel, "log-level", "info", logging.Levels)
	return cmd
}
