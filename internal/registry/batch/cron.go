package batch

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed CronJob schedule.
type Schedule interface {
	// Next returns the first activation strictly after t, in t's location, or the zero
	// time when the schedule never fires within five years of t.
	Next(t time.Time) time.Time
}

// ParseSchedule parses a CronJob schedule as Kubernetes does (the standard five fields
// "minute hour day-of-month month day-of-week" with *, ?, lists, ranges, steps and month
// and weekday names; the descriptors @yearly, @annually, @monthly, @weekly, @daily,
// @midnight and @hourly; "@every <duration>"; and an optional leading TZ= or CRON_TZ=
// location). Errors carry Kubernetes' wording, which validation reports verbatim.
// Without a location prefix the schedule runs in the location of the time given to Next.
func ParseSchedule(s string) (Schedule, error) {
	if s == "" {
		return nil, fmt.Errorf("empty spec string")
	}
	var loc *time.Location
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		name, rest, _ := strings.Cut(s[strings.Index(s, "=")+1:], " ")
		l, err := time.LoadLocation(name)
		if err != nil {
			return nil, fmt.Errorf("provided bad location %s: %v", name, err)
		}
		loc, s = l, strings.TrimSpace(rest)
	}
	if strings.HasPrefix(s, "@") {
		return parseDescriptor(s, loc)
	}
	f := strings.Fields(s)
	if len(f) != 5 {
		return nil, fmt.Errorf("expected exactly 5 fields, found %d: %s", len(f), f)
	}
	spec := &specSchedule{loc: loc}
	var err error
	for i, dst := range []*uint64{&spec.minute, &spec.hour, &spec.dom, &spec.month, &spec.dow} {
		if *dst, err = parseField(f[i], cronFields[i]); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// starBit marks a field written as "*" or "?" (or a star with step 1): the day-of-month /
// day-of-week OR rule only applies when neither day field is a star.
const starBit = 1 << 63

type fieldBounds struct {
	min, max uint
	names    map[string]uint
}

var cronFields = [5]fieldBounds{
	{min: 0, max: 59},
	{min: 0, max: 23},
	{min: 1, max: 31},
	{min: 1, max: 12, names: map[string]uint{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{min: 0, max: 6, names: map[string]uint{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// parseField turns one comma separated field into a bit set of the values it allows.
func parseField(field string, b fieldBounds) (uint64, error) {
	var set uint64
	for _, expr := range strings.FieldsFunc(field, func(r rune) bool { return r == ',' }) {
		bits, err := parseRange(expr, b)
		if err != nil {
			return 0, err
		}
		set |= bits
	}
	return set, nil
}

// parseRange parses "*", "?", "N", "N-M", each optionally followed by "/step"; "N/step"
// runs from N to the field's maximum.
func parseRange(expr string, b fieldBounds) (uint64, error) {
	rangePart, stepPart, hasStep := strings.Cut(expr, "/")
	if hasStep && strings.Contains(stepPart, "/") {
		return 0, fmt.Errorf("too many slashes: %s", expr)
	}
	bounds := strings.Split(rangePart, "-")
	var start, end uint
	var extra uint64
	if bounds[0] == "*" || bounds[0] == "?" {
		start, end, extra = b.min, b.max, starBit
	} else {
		var err error
		if start, err = parseValue(bounds[0], b.names); err != nil {
			return 0, err
		}
		switch len(bounds) {
		case 1:
			end = start
		case 2:
			if end, err = parseValue(bounds[1], b.names); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("too many hyphens: %s", expr)
		}
	}
	step := uint(1)
	if hasStep {
		var err error
		if step, err = parseNumber(stepPart); err != nil {
			return 0, err
		}
		if len(bounds) == 1 {
			end = b.max
		}
		if step > 1 {
			extra = 0
		}
	}
	switch {
	case start < b.min:
		return 0, fmt.Errorf("beginning of range (%d) below minimum (%d): %s", start, b.min, expr)
	case end > b.max:
		return 0, fmt.Errorf("end of range (%d) above maximum (%d): %s", end, b.max, expr)
	case start > end:
		return 0, fmt.Errorf("beginning of range (%d) beyond end of range (%d): %s", start, end, expr)
	case step == 0:
		return 0, fmt.Errorf("step of range should be a positive number: %s", expr)
	}
	var set uint64
	for v := start; v <= end; v += step {
		set |= 1 << v
	}
	return set | extra, nil
}

func parseValue(s string, names map[string]uint) (uint, error) {
	if v, ok := names[strings.ToLower(s)]; ok {
		return v, nil
	}
	return parseNumber(s)
}

func parseNumber(s string) (uint, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("failed to parse int from %s: %s", s, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number (%d) not allowed: %s", n, s)
	}
	return uint(n), nil
}

func parseDescriptor(s string, loc *time.Location) (Schedule, error) {
	all := func(b fieldBounds) uint64 {
		var set uint64
		for v := b.min; v <= b.max; v++ {
			set |= 1 << v
		}
		return set | starBit
	}
	spec := &specSchedule{loc: loc, minute: 1, hour: 1, dom: all(cronFields[2]), month: all(cronFields[3]), dow: all(cronFields[4])}
	switch s {
	case "@yearly", "@annually":
		spec.dom, spec.month = 1<<1, 1<<1
	case "@monthly":
		spec.dom = 1 << 1
	case "@weekly":
		spec.dow = 1 << 0
	case "@daily", "@midnight":
	case "@hourly":
		spec.hour = all(cronFields[1])
	default:
		const every = "@every "
		if !strings.HasPrefix(s, every) {
			return nil, fmt.Errorf("unrecognized descriptor: %s", s)
		}
		d, err := time.ParseDuration(s[len(every):])
		if err != nil {
			return nil, fmt.Errorf("failed to parse duration %s: %s", s, err)
		}
		// Intervals are whole seconds, at least one.
		d = d.Truncate(time.Second)
		if d < time.Second {
			d = time.Second
		}
		return everySchedule(d), nil
	}
	return spec, nil
}

// everySchedule fires at a fixed interval after the (whole second of the) given time.
type everySchedule time.Duration

func (e everySchedule) Next(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Duration(e))
}

// specSchedule holds one bit per allowed value of each field.
type specSchedule struct {
	minute, hour, dom, month, dow uint64
	loc                           *time.Location
}

// dayMatches applies cron's day rule: when both day fields are restricted, either may
// match; when one is a star, both must.
func (s *specSchedule) dayMatches(t time.Time) bool {
	domOK := s.dom&(1<<uint(t.Day())) != 0
	dowOK := s.dow&(1<<uint(t.Weekday())) != 0
	if s.dom&starBit != 0 || s.dow&starBit != 0 {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// Next walks forward field by field, jumping to the start of the next month, day, hour or
// minute whenever a field does not match.
func (s *specSchedule) Next(t time.Time) time.Time {
	orig := t.Location()
	loc := orig
	if s.loc != nil {
		loc = s.loc
	}
	t = t.In(loc)
	t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute()+1, 0, 0, loc)
	limit := t.Year() + 5
	for t.Year() <= limit {
		switch {
		case s.month&(1<<uint(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
		case !s.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		case s.hour&(1<<uint(t.Hour())) == 0:
			t = nextHour(t)
		case s.minute&(1<<uint(t.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t.In(orig)
		}
	}
	return time.Time{}
}

// nextHour moves to the start of the next hour in absolute time, so a DST change never
// makes the walk stand still.
func nextHour(t time.Time) time.Time {
	return t.Add(time.Duration(60-t.Minute()) * time.Minute)
}
