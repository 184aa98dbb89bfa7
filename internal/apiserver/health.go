package apiserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
)

// healthMux serves /healthz, /livez and /readyz as kube-apiserver does (k8s.io/apiserver's
// healthz handlers): "ok", or with ?verbose one "[+]check ok" line per check and
// "livez check passed"; ?exclude=CHECK skips a check; /readyz/CHECK runs one. A failing
// check answers 500 with "[-]CHECK failed: reason withheld" (the reason is logged).
func (s *Server) healthMux() *http.ServeMux {
	etcd := healthz.NamedCheck("etcd", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		_, err := s.cfg.Storage.Revision(ctx)
		return err
	})
	bootstrap := healthz.NamedCheck("poststarthook/tranche-bootstrap", func(*http.Request) error {
		if s.cfg.Ready != nil {
			return s.cfg.Ready()
		}
		return nil
	})
	shutdown := healthz.NamedCheck("shutdown", func(*http.Request) error {
		if s.bg.Err() != nil {
			return errors.New("the server is shutting down")
		}
		return nil
	})
	mux := http.NewServeMux()
	healthz.InstallPathHandler(mux, "/healthz", healthz.PingHealthz, healthz.LogHealthz, etcd, bootstrap)
	healthz.InstallLivezHandler(mux, healthz.PingHealthz, healthz.LogHealthz, etcd, bootstrap)
	healthz.InstallReadyzHandler(mux, healthz.PingHealthz, healthz.LogHealthz, etcd, bootstrap, shutdown)
	return mux
}

// isHealthPath reports the paths healthMux serves.
func isHealthPath(p string) bool {
	for _, root := range []string{"/healthz", "/livez", "/readyz"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}
