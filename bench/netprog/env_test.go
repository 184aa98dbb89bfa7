package netprog

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tranche/tranche/internal/netns"
)

// histogram is one Prometheus histogram read from a /metrics page: cumulative counts
// per upper bound, sum and count.
type histogram struct {
	bounds []float64
	counts []float64
	sum    float64
	count  float64
}

// scrapeHistogram fetches http://127.0.0.1:10249/metrics from inside a node's namespace
// (the proxy's metrics port) and returns the named histogram.
func scrapeHistogram(nsName, name string) (histogram, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(nsName, network, addr, 2*time.Second)
		}}}
	resp, err := hc.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	return parseHistogram(resp.Body, name)
}

// parseHistogram reads the Prometheus text format and keeps name's buckets, sum and
// count (a histogram without labels).
func parseHistogram(r io.Reader, name string) (histogram, error) {
	var h histogram
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		key, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return h, fmt.Errorf("metrics line %q: %w", line, err)
		}
		switch {
		case key == name+"_sum":
			h.sum = v
		case key == name+"_count":
			h.count = v
		case strings.HasPrefix(key, name+`_bucket{le="`):
			le := strings.TrimSuffix(strings.TrimPrefix(key, name+`_bucket{le="`), `"}`)
			bound, err := strconv.ParseFloat(le, 64)
			if err != nil {
				return h, fmt.Errorf("metrics line %q: %w", line, err)
			}
			h.bounds = append(h.bounds, bound)
			h.counts = append(h.counts, v)
		}
	}
	if err := sc.Err(); err != nil {
		return h, err
	}
	if h.bounds == nil {
		return h, fmt.Errorf("no histogram %s on the metrics page", name)
	}
	return h, nil
}

// sub is h minus an earlier scrape of the same histogram: the observations made in
// between.
func (h histogram) sub(old histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), sum: h.sum - old.sum, count: h.count - old.count}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(old.counts) {
			out.counts[i] -= old.counts[i]
		}
	}
	return out
}

// add sums two scrapes of histograms with the same buckets (several nodes).
func (h histogram) add(o histogram) histogram {
	if h.bounds == nil {
		return o
	}
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), sum: h.sum + o.sum, count: h.count + o.count}
	for i := range h.counts {
		out.counts[i] = h.counts[i] + o.counts[i]
	}
	return out
}

// quantile estimates the q-quantile the way PromQL's histogram_quantile does: linear
// interpolation inside the bucket that holds it. NaN when there are no observations.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return nan()
	}
	rank := q * h.count
	i := sort.Search(len(h.counts), func(i int) bool { return h.counts[i] >= rank })
	if i == len(h.counts) || (i == len(h.bounds)-1 && h.bounds[i] > 1e300) {
		// In the +Inf bucket: the highest finite bound is all that is known.
		return h.bounds[len(h.bounds)-2]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.bounds[i-1], h.counts[i-1]
	}
	inBucket := h.counts[i] - below
	if inBucket == 0 {
		return h.bounds[i]
	}
	return lower + (h.bounds[i]-lower)*(rank-below)/inBucket
}
