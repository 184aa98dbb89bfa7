// Package builtin holds the programs the catalog's images run when they start the
// tranche binary under another name (Main): /agnhost runs Kubernetes' own agnhost
// subcommands, imported from k8s.io/kubernetes (agnhost.go), plus echo, a server of
// tranche's own that upstream's agnhost lacks; /pause runs tranche's pause, for a pause
// image built without its own small program.
//
// Tranche's own servers (pause and echo) are also run by Run: `agnhost echo --port=80`
// becomes Run(ctx, "echo", []string{"--port=80"}, ...). They listen on every address of
// the network namespace they run in (a pod's), stop when ctx is cancelled, and log to
// stdout/stderr as the container's output.
package builtin

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
)

// Server runs built-in servers. The zero value listens on all addresses and reports the
// kernel hostname, which is what a pod's process needs.
type Server struct {
	// ListenHost is the address servers bind (empty: all addresses). Tests use a
	// loopback address.
	ListenHost string
	// Hostname returns the name servers report; nil means os.Hostname.
	Hostname func() (string, error)
	// Listening, when set, is told each address a server bound (ports may be 0 in args).
	Listening func(network string, addr net.Addr)
}

type serverFunc func(s *Server, ctx context.Context, args []string, stdout, stderr io.Writer) error

// servers maps each of tranche's own servers to its implementation. agnhost's
// netexec, serve-hostname and test-webserver are upstream's (agnhost.go), not here.
var servers = map[string]serverFunc{
	"pause": (*Server).pause,
	"echo":  (*Server).echo,
}

// Names lists the built-in servers, sorted.
func Names() []string {
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Has reports whether name is a built-in server.
func Has(name string) bool {
	_, ok := servers[name]
	return ok
}

// Run runs the built-in server name with agnhost-style args on all addresses, until ctx
// is cancelled (nil error) or the server fails.
func Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	return (&Server{}).Run(ctx, name, args, stdout, stderr)
}

// Run runs the built-in server name with agnhost-style args; see the package Run.
func (s *Server) Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	f, ok := servers[name]
	if !ok {
		return fmt.Errorf("unknown built-in server %q (built in: %v)", name, Names())
	}
	return f(s, ctx, args, stdout, stderr)
}

func (s *Server) hostname() (string, error) {
	if s.Hostname != nil {
		return s.Hostname()
	}
	return os.Hostname()
}

func (s *Server) addr(port int) string {
	return net.JoinHostPort(s.ListenHost, strconv.Itoa(port))
}

func (s *Server) listened(network string, a net.Addr) {
	if s.Listening != nil {
		s.Listening(network, a)
	}
}

// parse parses agnhost-style flags ("--http-port=8080" or "--http-port 8080"), writing
// usage errors to stderr.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

// group runs servers until the first fails or ctx is done, then stops all of them.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

func newGroup(ctx context.Context) *group {
	g := &group{}
	g.ctx, g.cancel = context.WithCancel(ctx)
	return g
}

// fail records the first error and stops the group.
func (g *group) fail(err error) {
	g.once.Do(func() { g.err = err })
	g.cancel()
}

// spawn runs f; a non-nil error stops the group.
func (g *group) spawn(f func(ctx context.Context) error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(g.ctx); err != nil {
			g.fail(err)
		}
	}()
}

// wait blocks until every server returned and gives the first error (nil when the
// group was merely cancelled).
func (g *group) wait() error {
	<-g.ctx.Done()
	g.wg.Wait()
	return g.err
}

// pause blocks until ctx is done, as the pause container does until it is signalled.
func (s *Server) pause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := parse(flag.NewFlagSet("pause", flag.ContinueOnError), args, stderr); err != nil {
		return err
	}
	_, _ = fmt.Fprintln(stdout, "Paused")
	<-ctx.Done()
	_, _ = fmt.Fprintln(stdout, "Signal received: shutting down")
	return nil
}
