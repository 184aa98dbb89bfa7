package builtin

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
	wardle "k8s.io/sample-apiserver/pkg/cmd/server"
)

// sampleAPIServerMain runs Kubernetes' sample API server (k8s.io/sample-apiserver, the
// wardle.example.com group with Flunders and Fischers) as the process's program, as the
// e2e sample-apiserver image's /sample-apiserver does: the Aggregator conformance spec
// deploys it behind an APIService. Its flags are upstream's (--etcd-servers,
// --tls-cert-file, ...); it authenticates and authorizes by delegation to the cluster's
// API server, which it finds from the pod's in-cluster configuration. It handles SIGINT
// and SIGTERM itself (a graceful shutdown), so handlers the caller installed are reset.
func sampleAPIServerMain(_ context.Context, args []string, stdout, stderr io.Writer) int {
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	ctx := genericapiserver.SetupSignalContext()
	cmd := wardle.NewCommandStartWardleServer(ctx, wardle.NewWardleServerOptions(stdout, stderr), false)
	cmd.Use = "sample-apiserver"
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cli.Run(cmd)
}
