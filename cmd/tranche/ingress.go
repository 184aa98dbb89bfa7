package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/ingress"
	"github.com/tranche/tranche/internal/logging"
)

func ingressCmd() *cobra.Command {
	var cfg ingress.RunConfig
	var logLevel string
	var noAccessLog bool
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Serve networking.k8s.io/v1 Ingresses of the classes whose controller is " + ingress.ControllerName,
		Long: "Run the Ingress controller (kube-system/tranche-ingress behind a LoadBalancer Service): an HTTP(S)\n" +
			"reverse proxy routing by host and path to the ready endpoints of each backend's EndpointSlices.\n" +
			"In a pod it reads the API with its service account; elsewhere give --kubeconfig.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.HTTPListen == "" && cfg.HTTPSListen == "" {
				return fmt.Errorf("--http-listen and --https-listen are both empty: nothing to serve")
			}
			if cfg.Proxy.Attempts < 1 {
				return fmt.Errorf("--attempts must be at least 1, got %d", cfg.Proxy.Attempts)
			}
			if cfg.Proxy.MaxBodyBytes < 0 || cfg.MaxHeaderBytes < 0 {
				return fmt.Errorf("--max-body-bytes and --max-header-bytes must not be negative")
			}
			cfg.Proxy.AccessLog = !noAccessLog
			log, err := logging.New(logLevel, os.Stderr)
			if err != nil {
				return err
			}
			cfg.Logger = log.With("component", "ingress")
			return ingress.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig to read the API with (default: the pod's service account)")
	f.StringVar(&cfg.APIServer, "api-server", "", "API server URL (default: from the kubeconfig, or KUBERNETES_SERVICE_HOST/PORT in a pod)")
	f.StringVar(&cfg.HTTPListen, "http-listen", ":80", "address for plain HTTP (empty: none)")
	f.StringVar(&cfg.HTTPSListen, "https-listen", ":443", "address for HTTPS, HTTP/2 by ALPN (empty: none)")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", ":10254", "address of /metrics, /healthz and /ready (empty: none)")
	f.StringVar(&cfg.PublishService, "publish-service", "kube-system/tranche-ingress", "namespace/name of the Service whose load-balancer status Ingresses get (empty: leave status alone)")
	f.Int64Var(&cfg.Proxy.MaxBodyBytes, "max-body-bytes", 100<<20, "largest request body accepted (413 beyond; 0: no limit)")
	f.IntVar(&cfg.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest request header accepted (431 beyond)")
	f.IntVar(&cfg.Proxy.Attempts, "attempts", 3, "endpoints an idempotent request without a body tries when connecting fails")
	f.DurationVar(&cfg.Proxy.DialTimeout, "dial-timeout", 0, "time to connect to one endpoint (0: 2s)")
	f.BoolVar(&noAccessLog, "no-access-log", false, "do not log one line per request")
	f.StringVar(&logLevel, "log-level", "info", logging.Levels)
	return cmd
}
