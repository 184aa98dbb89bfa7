package runtime

import (
	"time"

	"k8s.io/utils/clock"
)

// phases times the steps of one piece of work (a container's start, a sandbox's
// creation) for the debug log line that says where its time went: each mark records
// the time since the previous one under a name, and attrs lists them with the total,
// as slog key/value pairs (durations, which a text handler writes as "1.5ms").
type phases struct {
	clock       clock.PassiveClock
	first, last time.Time
	marks       []any
}

func newPhases(c clock.PassiveClock) *phases {
	now := c.Now()
	return &phases{clock: c, first: now, last: now}
}

// mark ends the step called name.
func (p *phases) mark(name string) {
	now := p.clock.Now()
	p.marks = append(p.marks, name, now.Sub(p.last))
	p.last = now
}

// attrs are the marked steps and "total", the time since the phases began.
func (p *phases) attrs() []any {
	return append(append([]any(nil), p.marks...), "total", p.last.Sub(p.first))
}
