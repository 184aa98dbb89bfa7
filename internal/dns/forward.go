package dns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

// Bounds of the forwarding cache: answers are kept for their TTL, at most a day
// (positive) or an hour (negative), in at most maxEntries entries.
const (
	defaultCacheEntries = 10000
	maxPositiveTTL      = 24 * time.Hour
	maxNegativeTTL      = time.Hour
	defaultFwdTimeout   = 2 * time.Second
)

// forwarder resolves names outside the cluster zone through upstream resolvers and
// keeps their answers, positive and negative, for as long as their TTLs say.
type forwarder struct {
	upstreams []string
	timeout   time.Duration
	next      atomic.Uint32 // round robin start
	cache     *answerCache
	inflight  singleflight.Group
	m         *metrics
	now       func() time.Time
}

func newForwarder(upstreams []string, entries int, timeout time.Duration, m *metrics, now func() time.Time) *forwarder {
	if entries <= 0 {
		entries = defaultCacheEntries
	}
	if timeout <= 0 {
		timeout = defaultFwdTimeout
	}
	return &forwarder{upstreams: upstreams, timeout: timeout, m: m, now: now,
		cache: &answerCache{max: entries, entries: map[cacheKey]*cacheEntry{}}}
}

// errNoUpstream is returned when every upstream failed.
var errNoUpstream = errors.New("no upstream resolver answered")

// resolve returns the answer for name (lowercase fqdn) and qtype, from the cache with
// TTLs aged, or from an upstream. The message is the caller's to change.
func (f *forwarder) resolve(ctx context.Context, name string, qtype uint16) (m *dns.Msg, cached bool, err error) {
	key := cacheKey{name: name, qtype: qtype}
	now := f.now()
	if m, negative, ok := f.cache.get(key, now); ok {
		t := "success"
		if negative {
			t = "denial"
		}
		f.m.cacheHits.WithLabelValues(f.m.server, t, f.m.zoneCacheName, "").Inc()
		return m, true, nil
	}
	f.m.cacheMisses.WithLabelValues(f.m.server, f.m.zoneCacheName, "").Inc()
	// Questions asked at once (a burst of pods, a resolver's retries) share one upstream
	// exchange.
	v, err, _ := f.inflight.Do(name+"/"+strconv.Itoa(int(qtype)), func() (any, error) {
		return f.fetch(ctx, key, now)
	})
	if err != nil {
		return nil, false, err
	}
	return v.(*dns.Msg).Copy(), false, nil
}

// fetch asks the upstreams in turn and caches the answer.
func (f *forwarder) fetch(ctx context.Context, key cacheKey, now time.Time) (*dns.Msg, error) {
	name, qtype := key.name, key.qtype
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	req.RecursionDesired = true
	req.SetEdns0(1232, false)
	var errs []error
	start := int(f.next.Add(1))
	for i := range f.upstreams {
		up := f.upstreams[(start+i)%len(f.upstreams)]
		resp, err := f.exchange(ctx, req, up)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.m.fwdResponses.WithLabelValues(up, rcodeLabel(resp.Rcode)).Inc()
		if resp.Rcode == dns.RcodeServerFailure || resp.Rcode == dns.RcodeRefused {
			errs = append(errs, fmt.Errorf("%s: %s", up, dns.RcodeToString[resp.Rcode]))
			continue
		}
		stripOPT(resp)
		if ttl, negative, ok := cacheTTL(resp); ok {
			f.cache.put(key, resp, negative, now, ttl)
			f.m.cacheEntries.WithLabelValues(f.m.server, "success", f.m.zoneCacheName, "").Set(float64(f.cache.count(false)))
			f.m.cacheEntries.WithLabelValues(f.m.server, "denial", f.m.zoneCacheName, "").Set(float64(f.cache.count(true)))
		}
		return resp, nil
	}
	return nil, fmt.Errorf("%w for %s %s: %w", errNoUpstream, name, dns.TypeToString[qtype], errors.Join(errs...))
}

// exchange asks one upstream over UDP, and again over TCP when the answer is truncated.
func (f *forwarder) exchange(ctx context.Context, req *dns.Msg, up string) (*dns.Msg, error) {
	f.m.fwdRequests.WithLabelValues(up).Inc()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c := &dns.Client{Net: "udp", Timeout: f.timeout, UDPSize: 1232}
	resp, _, err := c.ExchangeContext(ctx, req, up)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, req, up)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", up, err)
	}
	// The answer is cached and served to every pod: one for another question (a spoofed
	// or confused reply that happened to carry the id) must not be taken.
	if q := req.Question[0]; resp.Id != req.Id || len(resp.Question) != 1 || resp.Question[0].Qtype != q.Qtype ||
		resp.Question[0].Qclass != q.Qclass || !strings.EqualFold(resp.Question[0].Name, q.Name) {
		return nil, fmt.Errorf("%s: answer does not match the question %s %s", up, q.Name, dns.TypeToString[q.Qtype])
	}
	return resp, nil
}

func stripOPT(m *dns.Msg) {
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
}

// cacheTTL says how long an upstream answer may be kept (RFC 2308 for negative
// answers: the smaller of the SOA's TTL and its MINIMUM). Answers without a usable
// TTL are not kept.
func cacheTTL(m *dns.Msg) (time.Duration, bool, bool) {
	negative := m.Rcode == dns.RcodeNameError || (m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0)
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
		return 0, false, false
	}
	var ttl uint32
	found := false
	if negative {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				ttl, found = min(soa.Hdr.Ttl, soa.Minttl), true
			}
		}
		if !found || ttl == 0 {
			return 0, true, false
		}
		return min(time.Duration(ttl)*time.Second, maxNegativeTTL), true, true
	}
	for _, rr := range append(append([]dns.RR{}, m.Answer...), m.Ns...) {
		if !found || rr.Header().Ttl < ttl {
			ttl, found = rr.Header().Ttl, true
		}
	}
	if ttl == 0 {
		return 0, false, false
	}
	return min(time.Duration(ttl)*time.Second, maxPositiveTTL), false, true
}

type cacheKey struct {
	name  string
	qtype uint16
}

type cacheEntry struct {
	msg      *dns.Msg
	stored   time.Time
	expires  time.Time
	negative bool
}

// answerCache is a bounded map of upstream answers. When full, an insert first drops
// expired entries among a few it looks at, else an arbitrary one (Go's map order is
// random), which keeps every operation O(1).
type answerCache struct {
	mu       sync.Mutex
	max      int
	entries  map[cacheKey]*cacheEntry
	negCount int
}

func (c *answerCache) get(k cacheKey, now time.Time) (*dns.Msg, bool, bool) {
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok && !now.Before(e.expires) {
		c.remove(k, e)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil, false, false
	}
	m := e.msg.Copy()
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, s := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range s {
			h := rr.Header()
			if h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m, e.negative, true
}

func (c *answerCache) put(k cacheKey, m *dns.Msg, negative bool, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[k]; ok {
		c.remove(k, old)
	}
	if len(c.entries) >= c.max {
		looked := 0
		for key, e := range c.entries {
			if !now.Before(e.expires) {
				c.remove(key, e)
			}
			if looked++; looked >= 8 {
				break
			}
		}
		for key, e := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			c.remove(key, e)
		}
	}
	c.entries[k] = &cacheEntry{msg: m.Copy(), stored: now, expires: now.Add(ttl), negative: negative}
	if negative {
		c.negCount++
	}
}

func (c *answerCache) remove(k cacheKey, e *cacheEntry) {
	delete(c.entries, k)
	if e.negative {
		c.negCount--
	}
}

func (c *answerCache) count(negative bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if negative {
		return c.negCount
	}
	return len(c.entries) - c.negCount
}

// len is the number of entries held (tests).
func (c *answerCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
