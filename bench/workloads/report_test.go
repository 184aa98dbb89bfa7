package workloads

import (
	"fmt"
	"io"
	"math"
	"sync"
	"text/tabwriter"
	"time"
)

// row is one line of the summary: our figure, the figure it is compared with, and their
// ratio (ours / reference).
type row struct {
	metric    string
	ours      string
	reference string
	ratio     float64
}

// report collects the rows of every sub-benchmark, in the order they were first set; a
// sub-benchmark run again replaces its rows.
type report struct {
	mu    sync.Mutex
	order []string
	rows  map[string]row
	notes []string
}

func newReport() *report { return &report{rows: map[string]row{}} }

func (rp *report) set(r row) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if _, ok := rp.rows[r.metric]; !ok {
		rp.order = append(rp.order, r.metric)
	}
	rp.rows[r.metric] = r
}

// note adds a line printed under the table.
func (rp *report) note(format string, args ...any) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.notes = append(rp.notes, fmt.Sprintf(format, args...))
}

// print writes the table; a ratio that could not be computed prints as "-".
func (rp *report) print(w io.Writer) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.order) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "metric\tours\treference\tratio")
	for _, m := range rp.order {
		r := rp.rows[m]
		ratio := "-"
		if !math.IsNaN(r.ratio) && !math.IsInf(r.ratio, 0) {
			ratio = fmt.Sprintf("%.2f", r.ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.metric, r.ours, r.reference, ratio)
	}
	tw.Flush()
	for _, n := range rp.notes {
		fmt.Fprintln(w, "  "+n)
	}
	fmt.Fprintln(w)
}

// secs formats a duration in seconds, or milliseconds under one second.
func secs(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// ratio divides without dividing by zero (NaN prints as "-").
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
