package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tranche/tranche/internal/nodeaddr"
	v1 "k8s.io/api/core/v1"
)

// DefaultResolution is how often nodes are scraped, metrics-server's default
// --metric-resolution: the window of the rates reported, and how stale they may be.
const DefaultResolution = 15 * time.Second

// Scraper reads every node's /metrics/resource once per Resolution and stores what it
// found, as metrics-server does. A node that cannot be scraped has no usage until it
// can be scraped twice again; the others are not held up by it.
type Scraper struct {
	// Nodes lists the nodes to scrape.
	Nodes func() ([]*v1.Node, error)
	// Client reaches the nodes' agents (their client certificate and dialer).
	Client *http.Client
	Store  *Store
	// Resolution is the scrape interval (DefaultResolution when zero); Timeout bounds
	// one node's scrape (5 s when zero).
	Resolution, Timeout time.Duration
	Logger              *slog.Logger

	// failing are the nodes whose last scrape failed: a node that stays down is
	// logged once, not every 15 s.
	failing map[string]bool
}

// Run scrapes until ctx ends, the first time at once. The Store's Resolution must be
// the same as the Scraper's.
func (s *Scraper) Run(ctx context.Context) {
	resolution := s.Resolution
	if resolution <= 0 {
		resolution = DefaultResolution
	}
	t := time.NewTicker(resolution)
	defer t.Stop()
	for {
		s.Scrape(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Scrape scrapes every node once, concurrently, and stores the batch. Calls must not
// overlap (Run makes them one after the other).
func (s *Scraper) Scrape(ctx context.Context) {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nodes, err := s.Nodes()
	if err != nil {
		log.Warn("listing nodes to scrape", "err", err)
		return
	}
	start := time.Now()
	batch := NewBatch()
	var mu sync.Mutex
	var wg sync.WaitGroup
	failing := map[string]bool{}
	for _, n := range nodes {
		wg.Go(func() {
			b, err := s.scrapeNode(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failing[n.Name] = true
				level := slog.LevelWarn
				if s.failing[n.Name] || ctx.Err() != nil {
					level = slog.LevelDebug
				}
				log.Log(ctx, level, "no resource metrics from a node: it has none until scraped twice again", "node", n.Name, "err", err)
				return
			}
			if s.failing[n.Name] {
				log.Info("resource metrics from a node again", "node", n.Name)
			}
			batch.Merge(b)
		})
	}
	wg.Wait()
	s.failing = failing
	if ctx.Err() != nil {
		return
	}
	s.Store.Add(batch)
	log.Debug("scraped resource metrics", "nodes", len(batch.Nodes), "pods", len(batch.Pods), "duration", time.Since(start))
}

func (s *Scraper) scrapeNode(ctx context.Context, n *v1.Node) (*Batch, error) {
	u, err := resourceURL(n)
	if err != nil {
		return nil, err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	at := time.Now()
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
	}
	return DecodeResourceMetrics(io.LimitReader(resp.Body, 64<<20), n.Name, at)
}

// resourceURL is the node's /metrics/resource: its InternalIP (else ExternalIP, else
// hostname) and kubelet port, as metrics-server's default address order has it.
func resourceURL(n *v1.Node) (string, error) {
	hostPort, ok := nodeaddr.Kubelet(n)
	if !ok {
		return "", fmt.Errorf("node %s has no address", n.Name)
	}
	return "https://" + hostPort + "/metrics/resource", nil
}
