package api

import (
	"fmt"

	"github.com/tranche/tranche/bench/benchreport"
)

// The summary table is benchreport's; these names keep the benchmark's code short.
type (
	row    = benchreport.Row
	report = benchreport.Report
)

var (
	newReport = benchreport.New
	ms        = benchreport.Ms
	ratio     = benchreport.Ratio
)

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
