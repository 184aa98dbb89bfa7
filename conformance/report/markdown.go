package main

import (
	"fmt"
	"strings"
	"time"
)

// Markdown renders run as conformance/README.md: how to run, the summary table, the total
// time, and per failed spec its name and first failure line.
func Markdown(run Run) string {
	var b strings.Builder
	b.WriteString("# Conformance\n\n")
	b.WriteString("Kubernetes' own [Conformance] e2e specs (k8s.io/kubernetes v1.37.2, test/e2e) against a\n")
	b.WriteString("fresh `tranche up --nodes 2 --zones a,b`, written by `make conformance` (conformance/run;\n")
	b.WriteString("`AREAS=\"sig-network\"` or `CONFORMANCE_FOCUS=regexp` run a subset). This file is the list of\n")
	b.WriteString("what fails now.\n\n")
	if run.Note != "" {
		fmt.Fprintf(&b, "%s.\n\n", strings.TrimSuffix(run.Note, "."))
	}
	b.WriteString("| area | specs | passed | failed | skipped | duration |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|\n")
	var sum Area
	for _, a := range run.Areas {
		if a.Missing {
			fmt.Fprintf(&b, "| %s | no report | | | | %s |\n", a.Name, minutes(a.Duration))
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s |\n", a.Name, a.Specs(), a.Passed, len(a.Failed), a.Skipped, minutes(a.Duration))
		sum.Passed += a.Passed
		sum.Failed = append(sum.Failed, a.Failed...)
		sum.Skipped += a.Skipped
		sum.Duration += a.Duration
	}
	fmt.Fprintf(&b, "| **total** | %d | %d | %d | %d | %s |\n\n", sum.Specs(), sum.Passed, len(sum.Failed), sum.Skipped, minutes(sum.Duration))
	if run.Total > 0 {
		fmt.Fprintf(&b, "Total run time on this machine (2 cores, build excluded, cluster start included): %s", minutes(run.Total))
		if run.Procs > 0 {
			fmt.Fprintf(&b, "; non-[Serial] specs on %d ginkgo processes, [Serial] ones on one", run.Procs)
		}
		b.WriteString(".\n\n")
	}
	for _, a := range run.Areas {
		if len(a.Failed) == 0 && len(a.SuiteFailures) == 0 && len(a.Images) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s: failed\n\n", a.Name)
		for _, f := range a.SuiteFailures {
			fmt.Fprintf(&b, "- suite node %s: %s\n", cell(f.Spec), code(f.Line))
		}
		for _, f := range a.Failed {
			fmt.Fprintf(&b, "- %s\n  %s\n", cell(f.Spec), code(f.Line))
		}
		if len(a.Images) > 0 {
			fmt.Fprintf(&b, "\nImages the built-in catalog lacks: %s\n", code(strings.Join(a.Images, ", ")))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// minutes formats d as the table shows durations: 1h02m, 12m05s, 40s.
func minutes(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
}

// cell escapes what would break a markdown list or table line.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// code quotes s as inline code, with a fence longer than any backtick run in it.
func code(s string) string {
	if s == "" {
		return ""
	}
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + s + pad + fence
}
