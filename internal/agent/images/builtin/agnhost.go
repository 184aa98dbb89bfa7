package builtin

import (
	"context"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"

	auditproxy "k8s.io/kubernetes/test/images/agnhost/audit-proxy"
	"k8s.io/kubernetes/test/images/agnhost/connect"
	crdconvwebhook "k8s.io/kubernetes/test/images/agnhost/crd-conversion-webhook"
	"k8s.io/kubernetes/test/images/agnhost/dns"
	entrypoint "k8s.io/kubernetes/test/images/agnhost/entrypoint-tester"
	externalmetrics "k8s.io/kubernetes/test/images/agnhost/external-metrics"
	"k8s.io/kubernetes/test/images/agnhost/fakegitserver"
	"k8s.io/kubernetes/test/images/agnhost/fakeregistryserver"
	grpchealthchecking "k8s.io/kubernetes/test/images/agnhost/grpc-health-checking"
	"k8s.io/kubernetes/test/images/agnhost/guestbook"
	h2cserver "k8s.io/kubernetes/test/images/agnhost/h2c-server"
	"k8s.io/kubernetes/test/images/agnhost/inclusterclient"
	"k8s.io/kubernetes/test/images/agnhost/liveness"
	logsgen "k8s.io/kubernetes/test/images/agnhost/logs-generator"
	"k8s.io/kubernetes/test/images/agnhost/mounttest"
	"k8s.io/kubernetes/test/images/agnhost/mtlsclient"
	"k8s.io/kubernetes/test/images/agnhost/mtlsserver"
	agnhostnet "k8s.io/kubernetes/test/images/agnhost/net"
	"k8s.io/kubernetes/test/images/agnhost/netexec"
	"k8s.io/kubernetes/test/images/agnhost/nettest"
	nosnat "k8s.io/kubernetes/test/images/agnhost/no-snat-test"
	nosnatproxy "k8s.io/kubernetes/test/images/agnhost/no-snat-test-proxy"
	"k8s.io/kubernetes/test/images/agnhost/nonewprivs"
	"k8s.io/kubernetes/test/images/agnhost/openidmetadata"
	"k8s.io/kubernetes/test/images/agnhost/pause"
	"k8s.io/kubernetes/test/images/agnhost/podcertificatesigner"
	portforwardtester "k8s.io/kubernetes/test/images/agnhost/port-forward-tester"
	"k8s.io/kubernetes/test/images/agnhost/porter"
	resconsumerctrl "k8s.io/kubernetes/test/images/agnhost/resource-consumer-controller"
	servehostname "k8s.io/kubernetes/test/images/agnhost/serve-hostname"
	tcpreset "k8s.io/kubernetes/test/images/agnhost/tcp-reset"
	testwebserver "k8s.io/kubernetes/test/images/agnhost/test-webserver"
	"k8s.io/kubernetes/test/images/agnhost/webhook"
	"k8s.io/kubernetes/third_party/forked/vishhstress"
)

// upstreamCommands are the subcommands of Kubernetes' own agnhost
// (k8s.io/kubernetes/test/images/agnhost), imported as a dependency so that the agnhost
// image behaves as the one the e2e tests were written for. Each is a package variable
// of its package, meant for one process: it parses into package variables, serves on
// http.DefaultServeMux, installs its own signal handlers and exits the process.
var upstreamCommands = []*cobra.Command{
	auditproxy.CmdAuditProxy,
	connect.CmdConnect,
	crdconvwebhook.CmdCrdConversionWebhook,
	dns.CmdDNSSuffix,
	dns.CmdDNSServerList,
	dns.CmdEtcHosts,
	entrypoint.CmdEntrypointTester,
	fakegitserver.CmdFakeGitServer,
	fakeregistryserver.CmdFakeRegistryServer,
	guestbook.CmdGuestbook,
	inclusterclient.CmdInClusterClient,
	liveness.CmdLiveness,
	logsgen.CmdLogsGenerator,
	mounttest.CmdMounttest,
	agnhostnet.CmdNet,
	netexec.CmdNetexec,
	nettest.CmdNettest,
	nosnat.CmdNoSnatTest,
	nosnatproxy.CmdNoSnatTestProxy,
	pause.CmdPause,
	porter.CmdPorter,
	portforwardtester.CmdPortForwardTester,
	resconsumerctrl.CmdResourceConsumerController,
	servehostname.CmdServeHostname,
	testwebserver.CmdTestWebserver,
	tcpreset.CmdTCPReset,
	webhook.CmdWebhook,
	openidmetadata.CmdTestServiceAccountIssuerDiscovery,
	grpchealthchecking.CmdGrpcHealthChecking,
	h2cserver.CmdH2CServer,
	vishhstress.CmdStress,
	podcertificatesigner.CmdPodCertificateSigner,
	mtlsclient.CmdMtlsClient,
	mtlsserver.CmdMtlsServer,
	nonewprivs.CmdNoNewPrivs,
	externalmetrics.CmdExternalMetricsServer,
}

// ownCommands are the agnhost subcommands that only tranche has: echo, which upstream's
// agnhost lacks and tranche's tests use as a stand-in server (ingress backends).
var ownCommands = []string{"echo"}

// agnhostNames lists the agnhost subcommands this binary runs, sorted: upstream's
// (less those left out) and tranche's own.
func agnhostNames() []string {
	var names []string
	for _, c := range upstreamCommands {
		names = append(names, c.Name())
	}
	names = append(names, ownCommands...)
	sort.Strings(names)
	return names
}

// agnhostMain runs `agnhost args...` as the process's program and returns its exit
// status: upstream's agnhost CLI (a cobra root whose errors and logging flags are
// component-base's, as upstream's main has them) with tranche's own subcommands added.
// An upstream subcommand writes to the process's own stdout and stderr and handles
// signals itself, so SIGINT and SIGTERM handlers the caller installed are reset first:
// a subcommand that installs none then dies of SIGTERM (or, as a container's PID 1,
// ignores it) as upstream's does. stdout and stderr take cobra's usage and error
// output and what tranche's own subcommands write.
func agnhostMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:     "agnhost",
		Short:   "Kubernetes' e2e test image program, as the agnhost image of tranche runs it",
		Version: upstreamVersion(),
		// Upstream's subcommands install their own signal handlers; a caller's must
		// not swallow SIGTERM for those that install none.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if !slices.Contains(ownCommands, cmd.Name()) {
				signal.Reset(os.Interrupt, syscall.SIGTERM)
			}
		},
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(upstreamCommands...)
	for _, name := range ownCommands {
		root.AddCommand(ownCommand(ctx, name, stdout, stderr))
	}
	return exitStatus(cli.RunNoErrOutput(root), "agnhost", stderr)
}

// ownCommand runs tranche's built-in server name as an agnhost subcommand, with its
// own flag parsing (agnhost-style flags), until ctx is cancelled or the process gets
// SIGINT or SIGTERM.
func ownCommand(ctx context.Context, name string, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              "tranche's " + name + " server (not in upstream's agnhost)",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, name, args, stdout, stderr)
		},
	}
}

// upstreamVersion names the Kubernetes release the subcommands come from.
func upstreamVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "k8s.io/kubernetes" {
				return "k8s.io/kubernetes " + m.Version
			}
		}
	}
	return "k8s.io/kubernetes (version unknown)"
}
