package bootstrap

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	kubeletcert "k8s.io/kubernetes/pkg/kubelet/certificate"
)

// FollowCertificate makes the clients of rc present m's current certificate on every
// new connection, and close their connections once m has another one, so that they
// open new ones with it, until ctx ends: kubelet's own client transport
// (kubeletcert.UpdateTransport), which looks for a new certificate every 10 s. Left
// to client-go, a client configured with certificate files reads them again only
// every five minutes, and would present an expired certificate (and be refused) when
// certificates live less than that past their renewal (--cluster-signing-duration).
// The certificate manager renews at 70-90% of a certificate's life counted from its
// backdated NotBefore (5 min before issue), so even a 2-minute certificate is renewed
// at least 42 s before it expires: four periods.
//
// kubelet asks the transport to exit the process once its certificate has expired
// and the server answers; the agent does not (exitAfter 0), since exiting would skip
// its shutdown. rc's TLS settings move into its Transport, as client-go wants of a
// config with a Transport of its own: read them before.
func FollowCertificate(ctx context.Context, rc *rest.Config, m certificate.Manager, log *slog.Logger) error {
	if rc.Transport != nil || rc.Dial != nil || rc.WrapTransport != nil {
		return fmt.Errorf("following the node's certificate: the client already has a transport or dialer of its own")
	}
	if _, err := kubeletcert.UpdateTransport(logr.FromSlogHandler(log.Handler()), ctx.Done(), rc, m, 0); err != nil {
		return fmt.Errorf("following the node's certificate: %w", err)
	}
	return nil
}
