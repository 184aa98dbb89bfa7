package endpointslice

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"text/tabwriter"
	"time"
)

// row is one line of the summary: our figure, the figure it is compared with, their
// ratio (ours / reference) and the goal for that ratio.
type row struct {
	metric    string
	ours      string
	reference string
	ratio     float64
	goal      string
}

// report collects the rows of every sub-benchmark, keyed by metric (the last run wins),
// and notes printed under the table.
type report struct {
	mu    sync.Mutex
	order []string
	rows  map[string]row
	notes []string
}

func newReport() *report { return &report{rows: map[string]row{}} }

// set records or replaces the row for r.metric.
func (rp *report) set(r row) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if _, ok := rp.rows[r.metric]; !ok {
		rp.order = append(rp.order, r.metric)
	}
	rp.rows[r.metric] = r
}

// note adds a line printed under the table (set-up figures, break-downs).
func (rp *report) note(format string, args ...any) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.notes = append(rp.notes, fmt.Sprintf(format, args...))
}

// print writes the table; a ratio that could not be computed prints as "-".
func (rp *report) print(w io.Writer) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.order) == 0 && len(rp.notes) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "metric\tours\treference\tratio\tgoal")
	for _, m := range rp.order {
		r := rp.rows[m]
		ratio := "-"
		if !math.IsNaN(r.ratio) && !math.IsInf(r.ratio, 0) {
			ratio = fmt.Sprintf("%.2f", r.ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.metric, r.ours, r.reference, ratio, r.goal)
	}
	tw.Flush()
	for _, n := range rp.notes {
		fmt.Fprintln(w, "  "+n)
	}
	fmt.Fprintln(w)
}

// ms formats a duration in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.2f s", v/1000)
}

// msf converts a duration to fractional milliseconds for ReportMetric.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio divides without dividing by zero (NaN prints as "-").
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// percentile returns the p-th percentile (nearest rank) of ds, which it sorts.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := (len(ds)*p + 99) / 100
	return ds[max(rank-1, 0)]
}
