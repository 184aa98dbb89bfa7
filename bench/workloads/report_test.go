package workloads

import (
	"fmt"
	"time"

	"github.com/tranche/tranche/bench/benchreport"
)

// The summary table is benchreport's; these names keep the benchmark's code short.
type (
	row    = benchreport.Row
	report = benchreport.Report
)

var (
	newReport = benchreport.New
	ratio     = benchreport.Ratio
)

// secs formats a duration in seconds, or milliseconds under one second.
func secs(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
