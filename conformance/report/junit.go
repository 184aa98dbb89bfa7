package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The subset of the JUnit XML that ginkgo v2 writes (its reporters.JUnitTestSuites).
type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Time  float64     `xml:"time,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Skipped *junitMessage `xml:"skipped"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// suiteNodes are the name prefixes of ginkgo's suite-level nodes, which are not specs.
var suiteNodes = []string{"[BeforeSuite]", "[AfterSuite]", "[SynchronizedBeforeSuite]",
	"[SynchronizedAfterSuite]", "[ReportBeforeSuite]", "[ReportAfterSuite]", "[DeferCleanup (Suite)]"}

// missingImage matches the node agent's error for an image its catalog cannot build
// (internal/agent/images), also quoted once more inside an event or a status message.
var missingImage = regexp.MustCompile(`"([^"\s\\]+)\\?" is not in this node's image store`)

// Load reads the JUnit reports of each area's folder under dir. A spec counts for an area
// when its name carries the area's [sig-...] tag and [Conformance]; ginkgo also lists the
// specs its filters left out, as "skipped" with no reason, and those do not count.
func Load(dir string, areas []string) (Run, error) {
	var run Run
	for _, name := range areas {
		area := Area{Name: name}
		files, err := filepath.Glob(filepath.Join(dir, name, "junit_*.xml"))
		if err != nil {
			return run, err
		}
		sort.Strings(files)
		if len(files) == 0 {
			area.Missing = true
		}
		images := map[string]bool{}
		for _, f := range files {
			if err := area.add(f, images); err != nil {
				return run, err
			}
		}
		// The specs' output (conformance/run keeps it beside the reports) has the pods'
		// events, where a missing image shows even when the failure line does not.
		logs, err := filepath.Glob(filepath.Join(dir, name, "*.log"))
		if err != nil {
			return run, err
		}
		for _, f := range logs {
			b, err := os.ReadFile(f)
			if err != nil {
				return run, err
			}
			for _, m := range missingImage.FindAllSubmatch(b, -1) {
				images[string(m[1])] = true
			}
		}
		for img := range images {
			area.Images = append(area.Images, img)
		}
		sort.Strings(area.Images)
		// The run script records the area's wall-clock time; without it the suites' times add up.
		if b, err := os.ReadFile(filepath.Join(dir, name, "seconds")); err == nil {
			var s int
			if _, err := fmt.Sscan(string(b), &s); err == nil {
				area.Duration = time.Duration(s) * time.Second
			}
		}
		run.Areas = append(run.Areas, area)
	}
	return run, nil
}

// add counts the specs of one JUnit file into a.
func (a *Area) add(file string, images map[string]bool) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var s junitSuites
	if err := xml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if len(s.Suites) == 0 {
		return fmt.Errorf("%s: no <testsuite>", file)
	}
	tag := "[" + a.Name + "]"
	for _, suite := range s.Suites {
		a.Duration += time.Duration(suite.Time * float64(time.Second))
		for _, c := range suite.Cases {
			why := c.failure()
			for _, m := range missingImage.FindAllStringSubmatch(why, -1) {
				images[m[1]] = true
			}
			if isSuiteNode(c.Name) {
				if why != "" {
					a.SuiteFailures = append(a.SuiteFailures, Failure{Spec: c.Name, Line: firstLine(why)})
				}
				continue
			}
			if !strings.Contains(c.Name, tag) || !strings.Contains(c.Name, "[Conformance]") {
				continue
			}
			switch {
			case c.Skipped != nil && c.Skipped.Message == "skipped":
				// Left out by the run's filters (the other half of the area, a focus).
			case c.Skipped != nil || c.Status == "pending":
				a.Skipped++
			case c.Failure != nil || c.Error != nil:
				a.Failed = append(a.Failed, Failure{Spec: strings.TrimPrefix(c.Name, "[It] "), Line: firstLine(why)})
			case c.Status == "passed":
				a.Passed++
			}
		}
	}
	return nil
}

// failure is the text of c's failure or error element, or "".
func (c junitCase) failure() string {
	for _, m := range []*junitMessage{c.Failure, c.Error} {
		if m == nil {
			continue
		}
		if t := strings.TrimSpace(m.Text); t != "" {
			return t
		}
		if m.Message != "" {
			return m.Message
		}
		return m.Type
	}
	return ""
}

func isSuiteNode(name string) bool {
	for _, p := range suiteNodes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// firstLine is the first paragraph of a failure, on one line and shortened to 300
// characters: ginkgo puts its state tag ("[FAILED]") before the message, sometimes alone
// on its line, and gomega spreads one message over several lines ("Expected", the
// value, "to equal", ...); "In [It] at: file:line" ends it.
func firstLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" && (len(parts) == 0 || len(parts) == 1 && stateTag.MatchString(parts[0])):
			continue
		case l == "" || strings.HasPrefix(l, "In ["):
			return shorten(strings.Join(parts, " "))
		}
		parts = append(parts, l)
	}
	return shorten(strings.Join(parts, " "))
}

func shorten(s string) string {
	if r := []rune(s); len(r) > 300 {
		return string(r[:300]) + "…"
	}
	return s
}

// stateTag is a line holding only a spec state as ginkgo writes it: [FAILED], [TIMEDOUT] ...
var stateTag = regexp.MustCompile(`^\[[A-Z]+\]$`)
