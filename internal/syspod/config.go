// Package syspod holds what tranche's system pods (tranche dns, tranche ingress)
// share: finding the API server (an explicit kubeconfig, the in-cluster environment,
// or an API address with the pod's service account) and serving their metrics and
// probes.
package syspod

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tranche/tranche/internal/logging"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountDir is where the kubelet (here the agent) mounts a pod's service account
// token and the cluster's CA certificate.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Config returns the client configuration: kubeconfig when given (apiServer, if set,
// overrides its server); else, without apiServer, the in-cluster environment
// (KUBERNETES_SERVICE_HOST/PORT and the service account); else apiServer with the token
// and CA under saDir (ServiceAccountDir in a pod).
func Config(kubeconfig, apiServer, saDir string) (*rest.Config, error) {
	c, err := config(kubeconfig, apiServer, saDir)
	if err != nil {
		return nil, err
	}
	// A system pod's log is no place for the API's deprecation warnings.
	return logging.QuietWarnings(c, nil), nil
}

func config(kubeconfig, apiServer, saDir string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags(apiServer, kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return c, nil
	}
	if apiServer == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster (give --kubeconfig or --api-server): %w", err)
		}
		return c, nil
	}
	token := filepath.Join(saDir, "token")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("--api-server without --kubeconfig needs the pod's service account token: %w", err)
	}
	return &rest.Config{Host: apiServer, BearerTokenFile: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(saDir, "ca.crt")}}, nil
}
