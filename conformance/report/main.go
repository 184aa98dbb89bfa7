// Command report turns the JUnit reports of a conformance run (conformance/run) into the
// markdown results table of conformance/README.md: per area the specs run, passed, failed
// and skipped and how long they took, the run's total time, and per failed spec its name
// and the first line of its failure.
//
// Usage: go run ./conformance/report -reports DIR -areas "sig-network sig-apps" -out FILE
//
// DIR holds a folder per area with the junit_*.xml files the e2e framework writes
// (--report-dir, one per ginkgo run: the parallel and the [Serial] specs).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	reports := flag.String("reports", "", "directory with one folder of junit_*.xml per area")
	areas := flag.String("areas", "", "areas in table order, space separated")
	total := flag.Duration("total", 0, "wall-clock time of the whole run")
	procs := flag.Int("procs", 0, "parallel ginkgo processes of the non-[Serial] specs")
	note := flag.String("note", "", "line saying what was run, and when")
	out := flag.String("out", "", "markdown file to write (default: standard output)")
	flag.Parse()
	if *reports == "" || *areas == "" {
		fmt.Fprintln(os.Stderr, "report: -reports and -areas are required")
		os.Exit(2)
	}
	run, err := Load(*reports, strings.Fields(*areas))
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	run.Total = *total
	run.Procs = *procs
	run.Note = *note
	text := Markdown(run)
	if *out == "" {
		fmt.Print(text)
		return
	}
	if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// Run is what one conformance run produced, area by area.
type Run struct {
	Areas []Area
	Total time.Duration
	Procs int
	Note  string
}

// Area is the outcome of one area's specs (both of its ginkgo runs).
type Area struct {
	Name     string
	Passed   int
	Failed   []Failure
	Skipped  int
	Duration time.Duration
	// Missing is true when the area has no JUnit report (its run did not finish).
	Missing bool
	// SuiteFailures are failures of suite nodes (BeforeSuite ...), which fail every spec.
	SuiteFailures []Failure
	// Images are the image names a node could not find in its catalog.
	Images []string
}

// Specs is the number of the area's specs that were run or skipped at run time.
func (a Area) Specs() int { return a.Passed + len(a.Failed) + a.Skipped }

// Failure is one failed spec and the first line of why.
type Failure struct {
	Spec string
	Line string
}
