package ingress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"time"
)

// FallbackCertificate returns a self-signed certificate, valid from now for a year, that
// the HTTPS listener presents when no Ingress has a certificate for the requested name.
func FallbackCertificate(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "tranche ingress fallback certificate", Organization: []string{"tranche"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// ServeConfig is what Serve listens with.
type ServeConfig struct {
	HTTP, HTTPS net.Listener // either may be nil
	// Fallback is presented when no Ingress has a certificate for the SNI name.
	Fallback *tls.Certificate
	// MaxHeaderBytes bounds request headers; larger ones get 431.
	MaxHeaderBytes int
	Logger         *slog.Logger
}

// Serve answers HTTP/1.1 on cfg.HTTP and HTTP/1.1 and HTTP/2 (ALPN) on cfg.HTTPS with p
// until ctx is cancelled, then shuts down gracefully for up to 10 seconds.
func Serve(ctx context.Context, p *Proxy, cfg ServeConfig) error {
	newServer := func() *http.Server {
		return &http.Server{
			Handler:           p,
			MaxHeaderBytes:    cfg.MaxHeaderBytes,
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
	}
	var servers []*http.Server
	errc := make(chan error, 2)
	if cfg.HTTP != nil {
		s := newServer()
		servers = append(servers, s)
		go func() { errc <- s.Serve(cfg.HTTP) }()
	}
	if cfg.HTTPS != nil {
		if cfg.Fallback == nil {
			return errors.New("ingress: HTTPS listener without a fallback certificate")
		}
		s := newServer()
		s.TLSConfig = &tls.Config{GetCertificate: p.GetCertificate(cfg.Fallback), NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		servers = append(servers, s)
		go func() { errc <- s.ServeTLS(cfg.HTTPS, "", "") }()
	}
	if len(servers) == 0 {
		return errors.New("ingress: no listener")
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			for _, s := range servers {
				s.Close()
			}
			return fmt.Errorf("ingress: serving: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(sctx)
	}
	return nil
}
