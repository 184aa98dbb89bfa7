// Package embedded runs a single-member etcd inside the tranche process for `tranche up`.
// It listens only on unix sockets inside its data directory, so nothing outside the
// machine (or another user without access to the directory) can reach it, and it leaves
// compaction to the API server.
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/tranche/tranche/internal/storage/etcd"
)

const (
	// memberName names the only member; it is part of the member's identity on disk, so
	// it must never change between restarts.
	memberName = "tranche"
	// quotaBytes is the backend size at which etcd raises its NOSPACE alarm.
	quotaBytes = 2 << 30
	// readyTimeout bounds start-up (WAL replay of a large store included).
	readyTimeout = time.Minute
	// snapshotCount is how many writes the member applies between raft snapshots, and
	// catchUpEntries how many log entries it keeps after one. etcd keeps the raft log
	// since the last snapshot in memory (10,000 + 5,000 entries by default, sized for
	// followers that fall behind); a single embedded member has no follower, and an idle
	// cluster still writes a Lease renewal every few seconds per node and controller, so
	// the defaults would let that log grow to many megabytes of copies of objects.
	snapshotCount  = 1000
	catchUpEntries = 100
	// progressInterval is how often an idle watch gets a progress notification; the API
	// server turns them into bookmarks and uses them to know its cache is current.
	progressInterval = 5 * time.Second
	// maxSocketPath is the longest path a unix socket address can hold on Linux.
	maxSocketPath = 107
)

// Config says where the embedded etcd keeps its data and where it logs.
type Config struct {
	// DataDir holds the member's data and its sockets; it is created if missing. Restarting
	// on the same DataDir resumes the same store.
	DataDir string
	// Logger receives etcd's warnings and errors; nil discards them.
	Logger *slog.Logger
}

// Server is a running embedded etcd with a client connected to it.
type Server struct {
	etcd      *embed.Etcd
	client    *clientv3.Client
	endpoints []string
}

// Start starts the embedded etcd and returns once it serves requests and a client is
// connected. ctx bounds start-up only; stop the server with Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd data dir %q: %w", cfg.DataDir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd data dir %q: %w", dir, err)
	}
	clientSock := filepath.Join(dir, "etcd.sock")
	peerSock := filepath.Join(dir, "etcd-peer.sock")
	if len(peerSock) > maxSocketPath {
		return nil, fmt.Errorf("embedded etcd data dir %q: path too long for a unix socket (at most %d bytes with %q)",
			dir, maxSocketPath-len("/etcd-peer.sock"), "/etcd-peer.sock")
	}

	// etcd replaces an existing socket file before it locks its data, so a second server
	// on the same directory would take the first one's socket away; refuse instead.
	if conn, err := net.DialTimeout("unix", clientSock, time.Second); err == nil {
		conn.Close()
		return nil, fmt.Errorf("start embedded etcd in %q: already running (%s answers)", dir, clientSock)
	}

	ec := embed.NewConfig()
	ec.Name = memberName
	ec.Dir = dir
	clientURL := url.URL{Scheme: "unix", Path: clientSock}
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	// A single member never dials its peers, but etcd still wants a peer listener. It
	// takes a unix socket's path from the URL's host part, which does not survive a trip
	// through a URL string, so the advertised form (stored as the member's identity) is
	// the ordinary unix:///path one.
	peerURL := url.URL{Scheme: "unix", Path: peerSock}
	ec.ListenPeerUrls = []url.URL{{Scheme: "unix", Host: peerSock}}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = memberName + "=" + peerURL.String()
	ec.AutoCompactionRetention = "0"
	ec.QuotaBackendBytes = quotaBytes
	ec.SnapshotCount = snapshotCount
	ec.SnapshotCatchUpEntries = catchUpEntries
	ec.WatchProgressNotifyInterval = progressInterval
	ec.EnableGRPCGateway = false
	ec.LogLevel = "warn"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcd.ZapLogger(cfg.Logger))

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %q: %w", dir, err)
	}
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd in %q: %w", dir, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("start embedded etcd in %q: not ready after %s", dir, readyTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd in %q: %w", dir, ctx.Err())
	}

	endpoints := []string{clientURL.String()}
	client, err := etcd.Dial(ctx, endpoints, cfg.Logger)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("start embedded etcd in %q: %w", dir, err)
	}
	return &Server{etcd: e, client: client, endpoints: endpoints}, nil
}

// Client returns the server's client. It stays valid until Close.
func (s *Server) Client() *clientv3.Client { return s.client }

// Endpoints returns the client URLs the server listens on (one unix socket).
func (s *Server) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// Close closes the client and stops the server, waiting for it to flush and release its
// data directory. It is safe to call after a storage.Interface built on Client was closed.
func (s *Server) Close() error {
	// The client may already be closed by the store built on it; that is not an error.
	_ = s.client.Close()
	s.etcd.Close()
	return nil
}
