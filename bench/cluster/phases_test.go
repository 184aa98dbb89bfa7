package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The agents' debug log lines that say where a pod's start-up time went
// (internal/agent and internal/agent/runtime), and the steps each times, in order.
var agentPhaseLines = []struct {
	msg, what string
	steps     []string
	// only is a key=value the line must carry to count ("" for all); first keeps
	// only a pod's first such line.
	only  string
	first bool
}{
	{"pod status written", "agent sync of the status that made the pod Ready", []string{"queued", "volumes", "runtime", "write"}, "ready=true", true},
	// The sandbox's network (netns, link) is made while the rest (etc, namespaces and
	// the first container's bundle) is; waited is what it added after them.
	{"pod sandbox created", "sandbox", []string{"address", "etc", "namespaces", "rest", "waited", "total", "netns", "link"}, "", false},
	{"container started", "container", []string{"env", "image", "plan", "layers", "bundle", "network", "run", "total"}, "", false},
}

// phaseDurations are the durations of the agents' timed steps, by log message and
// step, for the pods of one namespace.
type phaseDurations map[string]map[string][]time.Duration

// readAgentPhases reads the debug lines of every agent's log below a cluster's data
// directory (DATA/nodes/NAME/agent.log) about the pods of namespace ns.
func readAgentPhases(dataDir, ns string) (phaseDurations, error) {
	logs, err := filepath.Glob(filepath.Join(dataDir, "nodes", "*", "agent.log"))
	if err != nil {
		return nil, err
	}
	out := phaseDurations{}
	seen := map[string]bool{}
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			kv := logFields(sc.Text())
			if !strings.HasPrefix(kv["pod"], ns+"/") {
				continue
			}
			for _, l := range agentPhaseLines {
				if kv["msg"] != l.msg {
					continue
				}
				if k, v, ok := strings.Cut(l.only, "="); ok && kv[k] != v {
					continue
				}
				if l.first {
					if seen[l.msg+" "+kv["pod"]] {
						continue
					}
					seen[l.msg+" "+kv["pod"]] = true
				}
				if out[l.msg] == nil {
					out[l.msg] = map[string][]time.Duration{}
				}
				for _, s := range l.steps {
					if d, err := time.ParseDuration(kv[s]); err == nil {
						out[l.msg][s] = append(out[l.msg][s], d)
					}
				}
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return out, nil
}

// logFields splits a log/slog text line (key=value, values with spaces quoted) into
// its fields.
func logFields(line string) map[string]string {
	kv := map[string]string{}
	for line != "" {
		line = strings.TrimLeft(line, " ")
		k, rest, ok := strings.Cut(line, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && (rest[end] != '"' || rest[end-1] == '\\') {
				end++
			}
			v = strings.ReplaceAll(rest[1:min(end, len(rest))], `\"`, `"`)
			rest = rest[min(end+1, len(rest)):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		kv[k] = v
		line = rest
	}
	return kv
}

// notes are one line per timed part: each step's p50 and how many were timed.
func (p phaseDurations) notes() []string {
	var out []string
	for _, l := range agentPhaseLines {
		steps := p[l.msg]
		if steps == nil {
			out = append(out, fmt.Sprintf("%s: no %q debug lines in the agents' logs", l.what, l.msg))
			continue
		}
		parts := make([]string, 0, len(l.steps))
		n := 0
		for _, s := range l.steps {
			d := steps[s]
			slices.Sort(d)
			n = max(n, len(d))
			parts = append(parts, fmt.Sprintf("%s %s", s, msFine(percentile(d, 0.5))))
		}
		out = append(out, fmt.Sprintf("%s (p50 of %d): %s", l.what, n, strings.Join(parts, ", ")))
	}
	return out
}

// msFine formats a short duration in milliseconds with one decimal.
func msFine(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
