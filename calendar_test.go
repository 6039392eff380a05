package floodgate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestCalendarBounds: calendar periods across month ends, leap years and
// both DST changes of 2026 in two zones, and midnights skipped or
// repeated, to the second.
func TestCalendarBounds(t *testing.T) {
	berlin, ny := zone(t, "Europe/Berlin"), zone(t, "America/New_York")
	at := func(loc *time.Location, y int, m time.Month, d, h, min int) time.Time {
		return time.Date(y, m, d, h, min, 0, 0, loc)
	}
	utc := func(y int, m time.Month, d, h, min int) time.Time { return at(time.UTC, y, m, d, h, min) }
	santiago, gaza, apia := zone(t, "America/Santiago"), zone(t, "Asia/Gaza"), zone(t, "Pacific/Apia")
	for _, c := range []struct {
		name       string
		cal        floodgate.Calendar
		t          time.Time
		start, end time.Time
		length     time.Duration
	}{
		// Berlin: CET → CEST at 02:00 on 29 March, back at 03:00 on 25 October.
		{"Berlin spring day", floodgate.Calendar{Period: floodgate.Day, Location: berlin}, at(berlin, 2026, 3, 29, 12, 0), at(berlin, 2026, 3, 29, 0, 0), at(berlin, 2026, 3, 30, 0, 0), 23 * time.Hour},
		{"Berlin autumn day", floodgate.Calendar{Period: floodgate.Day, Location: berlin}, at(berlin, 2026, 10, 25, 23, 59), at(berlin, 2026, 10, 25, 0, 0), at(berlin, 2026, 10, 26, 0, 0), 25 * time.Hour},
		// New York: EST → EDT at 02:00 on 8 March, back at 02:00 on 1 November.
		{"New York spring day", floodgate.Calendar{Period: floodgate.Day, Location: ny}, at(ny, 2026, 3, 8, 1, 59), at(ny, 2026, 3, 8, 0, 0), at(ny, 2026, 3, 9, 0, 0), 23 * time.Hour},
		{"New York autumn day", floodgate.Calendar{Period: floodgate.Day, Location: ny}, at(ny, 2026, 11, 1, 3, 0), at(ny, 2026, 11, 1, 0, 0), at(ny, 2026, 11, 2, 0, 0), 25 * time.Hour},
		// Midnight itself skipped or repeated: Santiago sprang from 00:00 to 01:00 on
		// 10 October 2010, Gaza fell back from 01:00 to 00:00 on 24 October 2020, and
		// Apia skipped 30 December 2011 whole. A day runs from its first instant to
		// the next day's, and holds every instant of its date.
		{"Santiago, next midnight skipped", floodgate.Calendar{Period: floodgate.Day, Location: santiago}, utc(2010, 10, 10, 3, 30), utc(2010, 10, 9, 4, 0), utc(2010, 10, 10, 4, 0), 24 * time.Hour},
		{"Gaza, midnight repeated", floodgate.Calendar{Period: floodgate.Day, Location: gaza}, utc(2020, 10, 23, 21, 30), utc(2020, 10, 23, 21, 0), utc(2020, 10, 24, 22, 0), 25 * time.Hour},
		{"Apia, the next day skipped", floodgate.Calendar{Period: floodgate.Day, Location: apia}, utc(2011, 12, 29, 15, 0), utc(2011, 12, 29, 10, 0), utc(2011, 12, 30, 10, 0), 24 * time.Hour},
		// A month holding the spring change is an hour short; October's an hour long.
		{"Berlin March", floodgate.Calendar{Period: floodgate.Month, Location: berlin}, at(berlin, 2026, 3, 31, 23, 59), at(berlin, 2026, 3, 1, 0, 0), at(berlin, 2026, 4, 1, 0, 0), 31*24*time.Hour - time.Hour},
		{"New York November", floodgate.Calendar{Period: floodgate.Month, Location: ny}, at(ny, 2026, 11, 1, 0, 0), at(ny, 2026, 11, 1, 0, 0), at(ny, 2026, 12, 1, 0, 0), 30*24*time.Hour + time.Hour},
		{"February 2026", floodgate.Calendar{Period: floodgate.Month}, at(time.UTC, 2026, 2, 28, 23, 59), at(time.UTC, 2026, 2, 1, 0, 0), at(time.UTC, 2026, 3, 1, 0, 0), 28 * 24 * time.Hour},
		{"February 2028, leap", floodgate.Calendar{Period: floodgate.Month}, at(time.UTC, 2028, 2, 29, 12, 0), at(time.UTC, 2028, 2, 1, 0, 0), at(time.UTC, 2028, 3, 1, 0, 0), 29 * 24 * time.Hour},
		{"year 2028, leap", floodgate.Calendar{Period: floodgate.Year, Location: berlin}, at(berlin, 2028, 12, 31, 23, 59), at(berlin, 2028, 1, 1, 0, 0), at(berlin, 2029, 1, 1, 0, 0), 366 * 24 * time.Hour},
		// 2026-01-01 is a Thursday; a week from Monday crosses the year's end.
		{"week from Monday", floodgate.Calendar{Period: floodgate.Week, Location: berlin, FirstDay: time.Monday}, at(berlin, 2026, 1, 1, 9, 0), at(berlin, 2025, 12, 29, 0, 0), at(berlin, 2026, 1, 5, 0, 0), 7 * 24 * time.Hour},
		{"week from Sunday over DST", floodgate.Calendar{Period: floodgate.Week, Location: ny}, at(ny, 2026, 3, 14, 23, 0), at(ny, 2026, 3, 8, 0, 0), at(ny, 2026, 3, 15, 0, 0), 7*24*time.Hour - time.Hour},
		// Billing from the 31st: short months start on their last day.
		{"billing 31, January", floodgate.Calendar{Period: floodgate.Billing, AnchorDay: 31, Location: berlin}, at(berlin, 2027, 2, 27, 12, 0), at(berlin, 2027, 1, 31, 0, 0), at(berlin, 2027, 2, 28, 0, 0), 28 * 24 * time.Hour},
		{"billing 31, February", floodgate.Calendar{Period: floodgate.Billing, AnchorDay: 31, Location: berlin}, at(berlin, 2027, 2, 28, 0, 0), at(berlin, 2027, 2, 28, 0, 0), at(berlin, 2027, 3, 31, 0, 0), 31*24*time.Hour - time.Hour},
		{"billing 30, leap February", floodgate.Calendar{Period: floodgate.Billing, AnchorDay: 30}, at(time.UTC, 2028, 3, 1, 0, 0), at(time.UTC, 2028, 2, 29, 0, 0), at(time.UTC, 2028, 3, 30, 0, 0), 30 * 24 * time.Hour},
		{"billing 17, before the anchor", floodgate.Calendar{Period: floodgate.Billing, AnchorDay: 17, Location: ny}, at(ny, 2026, 1, 16, 23, 59), at(ny, 2025, 12, 17, 0, 0), at(ny, 2026, 1, 17, 0, 0), 31 * 24 * time.Hour},
		{"billing 17, across the autumn change", floodgate.Calendar{Period: floodgate.Billing, AnchorDay: 17, Location: ny}, at(ny, 2026, 10, 17, 0, 0), at(ny, 2026, 10, 17, 0, 0), at(ny, 2026, 11, 17, 0, 0), 31*24*time.Hour + time.Hour},
	} {
		start, end := c.cal.Bounds(c.t)
		if !start.Equal(c.start) || !end.Equal(c.end) || end.Sub(start) != c.length {
			t.Errorf("%s: %v – %v (%v), want %v – %v (%v)", c.name, start, end, end.Sub(start), c.start, c.end, c.length)
		}
		p := floodgate.Policy{Name: "c", Algorithm: floodgate.FixedWindow, Quota: 1, Window: c.cal.Nominal(), Calendar: &c.cal}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if s, l := p.Span(c.t.UnixMicro()); s != c.start.UnixMicro() || l != c.length.Microseconds() {
			t.Errorf("%s: span %d + %d µs", c.name, s, l)
		}
	}
}

func TestCalendarValidate(t *testing.T) {
	month := &floodgate.Calendar{Period: floodgate.Month}
	for name, p := range map[string]floodgate.Policy{
		"window":    {Name: "c", Algorithm: floodgate.FixedWindow, Quota: 1, Window: 31 * 24 * time.Hour, Calendar: month},
		"algorithm": {Name: "c", Algorithm: floodgate.SlidingWindowCounter, Quota: 1, Window: 30 * 24 * time.Hour, Calendar: month},
		"anchor":    {Name: "c", Algorithm: floodgate.FixedWindow, Quota: 1, Window: 30 * 24 * time.Hour, Calendar: &floodgate.Calendar{Period: floodgate.Billing, AnchorDay: 32}},
		"period":    {Name: "c", Algorithm: floodgate.FixedWindow, Quota: 1, Window: 30 * 24 * time.Hour, Calendar: &floodgate.Calendar{}},
	} {
		var pe *floodgate.PolicyError
		if err := p.Validate(); !errors.As(err, &pe) || pe.Field != "calendar" {
			t.Errorf("%s: %v, want a calendar error", name, err)
		}
	}
}

func TestCalendarSame(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	again := zone(t, "Europe/Berlin")
	a := &floodgate.Calendar{Period: floodgate.Month, Location: berlin}
	switch {
	case !a.Same(&floodgate.Calendar{Period: floodgate.Month, Location: again}):
		t.Error("one zone loaded twice differs")
	case a.Same(&floodgate.Calendar{Period: floodgate.Month}):
		t.Error("Berlin equals UTC")
	case a.Same(nil) || !(*floodgate.Calendar)(nil).Same(nil):
		t.Error("nil calendars")
	case !(&floodgate.Calendar{Period: floodgate.Day}).Same(&floodgate.Calendar{Period: floodgate.Day, Location: time.UTC}):
		t.Error("nil location is UTC")
	}
}
