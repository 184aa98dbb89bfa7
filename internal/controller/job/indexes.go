package job

import (
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
)

// noIndex marks a pod without a valid completion index.
const noIndex = -1

// podIndex reads the pod's completion index annotation; noIndex when it is
// missing, malformed or not below completions.
func podIndex(pod *v1.Pod, completions int32) int {
	s, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= int(completions) {
		return noIndex
	}
	return i
}

// parseIndexes reads a completedIndexes string such as "1,3-5,7",
// ignoring malformed parts and indexes not below completions.
func parseIndexes(s string, completions int32) map[int]bool {
	out := map[int]bool{}
	if s == "" {
		return out
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := first; i <= last && i < int(completions); i++ {
			if i >= 0 {
				out[i] = true
			}
		}
	}
	return out
}

// formatIndexes writes a set of indexes in the API's compressed form:
// ascending, consecutive runs as "a-b".
func formatIndexes(set map[int]bool) string {
	ix := make([]int, 0, len(set))
	for i := range set {
		ix = append(ix, i)
	}
	sort.Ints(ix)
	var b strings.Builder
	for i := 0; i < len(ix); {
		j := i
		for j+1 < len(ix) && ix[j+1] == ix[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ix[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ix[j]))
		}
		i = j + 1
	}
	return b.String()
}
