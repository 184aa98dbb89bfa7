package bootstrap

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
)

// followPeriod is how often FollowCertificate looks for a new certificate.
const followPeriod = time.Second

// FollowCertificate makes the clients of rc present m's current certificate on every
// new connection, and closes their connections when m's certificate changes, so that
// they open new ones with it: as kubelet's client follows its rotating certificate,
// until ctx ends. Left to client-go, a client configured with certificate files reads
// them again only every five minutes, and would present an expired certificate (and be
// refused) when certificates live less than that past their renewal
// (--cluster-signing-duration). rc's TLS settings move into its Transport, as
// client-go wants of a config with a Transport of its own: read them before.
func FollowCertificate(ctx context.Context, rc *rest.Config, m certificate.Manager) error {
	if rc.Transport != nil || rc.Dial != nil || rc.WrapTransport != nil {
		return fmt.Errorf("following the node's certificate: the client already has a transport or dialer of its own")
	}
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		return err
	}
	if tlsConfig == nil {
		return fmt.Errorf("following the node's certificate: the client does not use TLS")
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := m.Current(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil // none: the server answers 401
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	go func() {
		last := m.Current()
		t := time.NewTicker(followPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				d.CloseAll()
				return
			case <-t.C:
			}
			if cur := m.Current(); cur != nil && cur != last {
				last = cur
				d.CloseAll()
			}
		}
	}()
	rc.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	rc.TLSClientConfig = rest.TLSClientConfig{}
	return nil
}
