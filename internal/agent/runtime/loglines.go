package runtime

import (
	"os"
	"strings"
)

// lastLogLines is the content of the last lines (at most n, and at most max bytes
// from the end) of a CRI log file, for kubelet's FallbackToLogsOnError termination
// message.
func lastLogLines(path string, n, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var out strings.Builder
	for _, l := range lines {
		// <time> <stream> <P|F> <content>
		f := strings.SplitN(l, " ", 4)
		if len(f) < 4 {
			continue
		}
		out.WriteString(f[3])
		if f[2] == "F" {
			out.WriteByte('\n')
		}
	}
	s := out.String()
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}
