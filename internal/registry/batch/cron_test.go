package batch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseScheduleErrors(t *testing.T) {
	cases := []struct{ schedule, want string }{
		{"", "empty spec string"},
		{"* * * *", "expected exactly 5 fields, found 4: [* * * *]"},
		{"60 * * * *", "end of range (60) above maximum (59): 60"},
		{"* * 0 * *", "beginning of range (0) below minimum (1): 0"},
		{"5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"},
		{"*/0 * * * *", "step of range should be a positive number: */0"},
		{"1-2-3 * * * *", "too many hyphens: 1-2-3"},
		{"*/2/3 * * * *", "too many slashes: */2/3"},
		{"x * * * *", `failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax`},
		{"* * * * 7", "end of range (7) above maximum (6): 7"},
		{"@fortnightly", "unrecognized descriptor: @fortnightly"},
		{"@every soon", `failed to parse duration @every soon: time: invalid duration "soon"`},
		{"TZ=Nowhere/Land * * * * *", "provided bad location Nowhere/Land: unknown time zone Nowhere/Land"},
		// robfig/cron panics on a location without fields; the API server
		// and the controller turn that into this error.
		{"TZ=UTC", "invalid schedule format: runtime error: slice bounds out of range [:-1]"},
	}
	for _, tc := range cases {
		t.Run(tc.schedule, func(t *testing.T) {
			_, err := ParseSchedule(tc.schedule)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScheduleNext(t *testing.T) {
	// 2025-03-01 is a Saturday.
	from := time.Date(2025, 3, 1, 10, 2, 30, 0, time.UTC)
	at := func(month time.Month, day, hour, min int) time.Time {
		return time.Date(2025, month, day, hour, min, 0, 0, time.UTC)
	}
	cases := []struct {
		schedule string
		from     time.Time
		want     []time.Time
	}{
		{"*/5 * * * *", from, []time.Time{at(3, 1, 10, 5), at(3, 1, 10, 10), at(3, 1, 10, 15)}},
		{"0 0 * * 0", from, []time.Time{at(3, 2, 0, 0), at(3, 9, 0, 0)}},
		{"15 9-11 * * *", from, []time.Time{at(3, 1, 10, 15), at(3, 1, 11, 15), at(3, 2, 9, 15)}},
		{"0,30 8 * * mon-fri", from, []time.Time{at(3, 3, 8, 0), at(3, 3, 8, 30), at(3, 4, 8, 0)}},
		// Both day fields restricted: the 15th OR any Monday.
		{"0 12 15 * 1", from, []time.Time{at(3, 3, 12, 0), at(3, 10, 12, 0), at(3, 15, 12, 0), at(3, 17, 12, 0)}},
		// A star day-of-month makes day-of-week alone decide.
		{"0 12 * * 1", from, []time.Time{at(3, 3, 12, 0), at(3, 10, 12, 0), at(3, 17, 12, 0)}},
		{"0 0 1 jan,jul *", from, []time.Time{at(7, 1, 0, 0), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"5/20 * * * *", from, []time.Time{at(3, 1, 10, 5), at(3, 1, 10, 25), at(3, 1, 10, 45)}},
		{"@hourly", from, []time.Time{at(3, 1, 11, 0), at(3, 1, 12, 0)}},
		{"@daily", from, []time.Time{at(3, 2, 0, 0)}},
		{"@weekly", from, []time.Time{at(3, 2, 0, 0), at(3, 9, 0, 0)}},
		{"@monthly", from, []time.Time{at(4, 1, 0, 0)}},
		{"@yearly", from, []time.Time{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"@every 90s", from, []time.Time{time.Date(2025, 3, 1, 10, 4, 0, 0, time.UTC), time.Date(2025, 3, 1, 10, 5, 30, 0, time.UTC)}},
		// Exactly on an activation: the next one is strictly later.
		{"*/5 * * * *", at(3, 1, 10, 5), []time.Time{at(3, 1, 10, 10)}},
		{"0 0 29 2 *", from, []time.Time{time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)}},
		{"0 0 30 2 *", from, []time.Time{{}}},
		// 09:00 in Paris is 08:00 UTC in winter.
		{"TZ=Europe/Paris 0 9 * * *", from, []time.Time{at(3, 2, 8, 0)}},
	}
	for _, tc := range cases {
		t.Run(tc.schedule, func(t *testing.T) {
			s, err := ParseSchedule(tc.schedule)
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Time
			for cur := tc.from; len(got) < len(tc.want); {
				cur = s.Next(cur)
				got = append(got, cur)
				if cur.IsZero() {
					break
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("activations (-want +got):\n%s", diff)
			}
		})
	}
}
