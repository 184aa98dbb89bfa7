package benchcluster

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Wrk is one run of wrk (Debian's) from inside a network namespace of the cluster.
type Wrk struct {
	// Bin is wrk's path; NS the network namespace it runs in (`ip netns exec`).
	Bin, NS string
	// Threads, Conns and Duration are wrk's -t, -c and -d ("2", "32", "4s").
	Threads, Conns, Duration string
	// Header is one extra request header ("Connection: close"), "" for none.
	Header string
}

var (
	wrkRate   = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkErrors = regexp.MustCompile(`(?m)^\s*(Socket errors:.*|Non-2xx or 3xx responses:.*)$`)
)

// Run loads url for w.Duration and returns wrk's requests/s and the error lines it
// printed (socket errors, non-2xx answers), joined with "; ", if any.
func (w Wrk) Run(url string) (float64, string, error) {
	args := []string{"netns", "exec", w.NS, w.Bin, "-t" + w.Threads, "-c" + w.Conns, "-d" + w.Duration}
	if w.Header != "" {
		args = append(args, "-H", w.Header)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append(args, url)...).CombinedOutput()
	if err != nil {
		return 0, "", fmt.Errorf("wrk %s in %s: %v\n%s", url, w.NS, err, out)
	}
	rps, errs, err := parseWrk(out)
	if err != nil {
		return 0, "", fmt.Errorf("wrk %s in %s: %w", url, w.NS, err)
	}
	return rps, errs, nil
}

// parseWrk reads wrk's report: its requests/s and its error lines joined with "; ".
func parseWrk(out []byte) (float64, string, error) {
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return 0, "", fmt.Errorf("no Requests/sec in its output:\n%s", out)
	}
	rps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, "", err
	}
	var errs []string
	for _, e := range wrkErrors.FindAllSubmatch(out, -1) {
		errs = append(errs, strings.TrimSpace(string(e[1])))
	}
	return rps, strings.Join(errs, "; "), nil
}

// Median is the middle value of v (the upper one of an even count; 0 when empty).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// FlushConntrack empties the conntrack table of each network namespace (`conntrack -F`
// there). A benchmark opening a connection per request flushes before each run: its
// client ports are otherwise reused while the previous run's entries still linger in
// TIME_WAIT (120 s), and the kernel's resolution of those clashes sets the pace.
func FlushConntrack(namespaces ...string) error {
	for _, n := range namespaces {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n, "conntrack", "-F").CombinedOutput()
		cancel()
		// conntrack -F says so on stderr and exits 0 when it flushed; it fails only
		// when the tool or the namespace is missing.
		if err != nil {
			return fmt.Errorf("conntrack -F in %s: %v: %s", n, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
