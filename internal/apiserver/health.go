package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// healthCheck is one named check of /healthz, /livez and /readyz.
type healthCheck struct {
	name  string
	check func(r *http.Request) error
}

// healthMux serves /healthz, /livez and /readyz as kube-apiserver does (k8s.io/apiserver's
// healthz handlers, written out here so that a probe runs little code): "ok", or with
// ?verbose one "[+]check ok" line per check and "livez check passed"; ?exclude=CHECK
// skips a check; /readyz/CHECK runs one. A failing check answers 500 with
// "[-]CHECK failed: reason withheld" (the reason is logged).
func (s *Server) healthMux() *http.ServeMux {
	ping := healthCheck{"ping", func(*http.Request) error { return nil }}
	// Logs go to a slog handler in the process; kube-apiserver's check that klog's
	// flushing is not blocked has nothing to wait for here.
	logCheck := healthCheck{"log", func(*http.Request) error { return nil }}
	etcd := healthCheck{"etcd", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		_, err := s.cfg.Storage.Revision(ctx)
		return err
	}}
	bootstrap := healthCheck{"poststarthook/tranche-bootstrap", func(*http.Request) error {
		if s.cfg.Ready != nil {
			return s.cfg.Ready()
		}
		return nil
	}}
	shutdown := healthCheck{"shutdown", func(*http.Request) error {
		if s.bg.Err() != nil {
			return errors.New("the server is shutting down")
		}
		return nil
	}}
	mux := http.NewServeMux()
	s.installHealth(mux, "/healthz", ping, logCheck, etcd, bootstrap)
	s.installHealth(mux, "/livez", ping, logCheck, etcd, bootstrap)
	s.installHealth(mux, "/readyz", ping, logCheck, etcd, bootstrap, shutdown)
	return mux
}

// installHealth serves path with checks, and path/NAME for each check alone.
func (s *Server) installHealth(mux *http.ServeMux, path string, checks ...healthCheck) {
	name := strings.TrimPrefix(path, "/")
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		excluded := r.URL.Query()["exclude"]
		unknown := slices.Clone(excluded)
		var out, failedLog bytes.Buffer
		var failed []string
		for _, c := range checks {
			if slices.Contains(excluded, c.name) {
				unknown = slices.DeleteFunc(unknown, func(n string) bool { return n == c.name })
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
				continue
			}
			if err := c.check(r); err != nil {
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
				fmt.Fprintf(&failedLog, "[-]%s failed: %v\n", c.name, err)
				failed = append(failed, c.name)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.name)
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			unknown = slices.Compact(unknown)
			quoted := make([]string, len(unknown))
			for i, n := range unknown {
				quoted[i] = fmt.Sprintf("%q", n)
			}
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(quoted, ","))
		}
		if len(failed) > 0 {
			s.log.Debug(name+" check failed", "checks", strings.Join(failed, ","), "detail", failedLog.String())
			http.Error(w, fmt.Sprintf("%s%s check failed", out.String(), name), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			_, _ = fmt.Fprint(w, "ok")
			return
		}
		_, _ = out.WriteTo(w)
		_, _ = fmt.Fprintf(w, "%s check passed\n", name)
	})
	for _, c := range checks {
		mux.HandleFunc(path+"/"+c.name, func(w http.ResponseWriter, r *http.Request) {
			if err := c.check(r); err != nil {
				http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
				return
			}
			_, _ = fmt.Fprint(w, "ok")
		})
	}
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
