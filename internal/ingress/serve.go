package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tranche/tranche/internal/auth/pki"
)

// FallbackCertificate returns a self-signed certificate, valid from now for a year, that
// the HTTPS listener presents when no Ingress has a certificate for the requested name.
func FallbackCertificate(now time.Time) (*tls.Certificate, error) {
	cert, err := pki.SelfSignedTLS(pki.SelfSignedRequest{
		CommonName:    "tranche ingress fallback certificate",
		Organizations: []string{"tranche"},
		NotBefore:     now.Add(-time.Minute),
		NotAfter:      now.Add(365 * 24 * time.Hour),
	})
	if err != nil {
		return nil, err
	}
	return &cert, nil
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
// until ctx is cancelled, then shuts down gracefully for up to 10 seconds. HTTP/1.1
// connections start on the lean path (see lean.go), which hands them to net/http's
// server and p.ServeHTTP when it meets a request it does not handle; HTTP/2 goes to
// net/http directly.
func Serve(ctx context.Context, p *Proxy, cfg ServeConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxHead := leanHeadMax
	if cfg.MaxHeaderBytes > 0 {
		maxHead = min(maxHead, cfg.MaxHeaderBytes)
	}
	type served struct {
		ln     net.Listener
		front  *front
		server *http.Server
	}
	var all []served
	add := func(ln net.Listener, tlsConfig *tls.Config) {
		handoff := newConnListener(ln.Addr())
		s := &http.Server{
			Handler:           p,
			MaxHeaderBytes:    cfg.MaxHeaderBytes,
			ReadHeaderTimeout: headerTimeout,
			IdleTimeout:       idleTimeout,
			TLSConfig:         tlsConfig,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
			BaseContext:       func(net.Listener) context.Context { return ctx },
			ConnContext: func(cctx context.Context, c net.Conn) context.Context {
				if pc, ok := c.(*prefixConn); ok && pc.tls {
					return context.WithValue(cctx, tlsConnKey{}, true)
				}
				return cctx
			},
		}
		fr := &front{p: p, tls: tlsConfig, maxHead: maxHead, handoff: handoff, log: log, conns: map[*leanConn]struct{}{},
			stopWatch: make(chan struct{}), watchDone: make(chan struct{})}
		all = append(all, served{ln: ln, front: fr, server: s})
	}
	if cfg.HTTP != nil {
		add(cfg.HTTP, nil)
	}
	if cfg.HTTPS != nil {
		if cfg.Fallback == nil {
			return errors.New("ingress: HTTPS listener without a fallback certificate")
		}
		add(cfg.HTTPS, &tls.Config{GetCertificate: p.GetCertificate(cfg.Fallback), NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	}
	if len(all) == 0 {
		return errors.New("ingress: no listener")
	}
	errc := make(chan error, len(all))
	for _, sv := range all {
		// Serve, not ServeTLS: handed-over connections are past their handshake; with h2
		// in TLSConfig.NextProtos, Serve still answers HTTP/2 on those that chose it.
		go func() { _ = sv.server.Serve(sv.front.handoff) }()
		go func() {
			defer close(sv.front.watchDone)
			sv.front.watch(sv.front.stopWatch)
		}()
		go func() {
			errc <- sv.front.serve(sv.ln)
		}()
	}
	var failed error
	select {
	case <-ctx.Done():
	case err := <-errc:
		failed = fmt.Errorf("ingress: serving: %w", err)
		if err == nil {
			failed = errors.New("ingress: a listener closed")
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, sv := range all {
		sv.ln.Close()
		wg.Go(func() { sv.front.shutdown(sctx) })
		wg.Go(func() { _ = sv.server.Shutdown(sctx) })
	}
	wg.Wait()
	return failed
}
