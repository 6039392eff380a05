package floodgate

import (
	"fmt"
	"time"
)

// Period is the length of a Calendar's windows.
type Period uint8

const (
	// Day runs from midnight to midnight: 23 or 25 hours across a DST change.
	Day Period = iota + 1
	// Week runs from midnight of Calendar.FirstDay for seven days.
	Week
	// Month runs from midnight of the 1st to midnight of the next 1st.
	Month
	// Year runs from midnight of 1 January.
	Year
	// Billing runs from midnight of Calendar.AnchorDay to the same day of
	// the next month; a month shorter than the anchor starts its period
	// on its last day (anchor 31: 28 February, then 31 March).
	Billing
)

var periodNames = [...]string{Day: "day", Week: "week", Month: "month", Year: "year", Billing: "billing"}

// String returns the period's name: "day", "week", "month", "year" or
// "billing".
func (p Period) String() string {
	if p == 0 || int(p) >= len(periodNames) {
		return fmt.Sprintf("period(%d)", uint8(p))
	}
	return periodNames[p]
}

// ParsePeriod is the inverse of Period.String. It returns a *PolicyError
// for an unknown name.
func ParsePeriod(s string) (Period, error) {
	for p, name := range periodNames {
		if p != 0 && name == s {
			return Period(p), nil
		}
	}
	return 0, &PolicyError{Field: "calendar", Msg: fmt.Sprintf("unknown period %q (want day, week, month, year or billing)", s)}
}

// nominal is each period's length in RateLimit-Policy's w (Policy.Window):
// the periods vary, so w cannot be their real length.
var nominal = [...]time.Duration{Day: 24 * time.Hour, Week: 7 * 24 * time.Hour, Month: 30 * 24 * time.Hour, Year: 365 * 24 * time.Hour, Billing: 30 * 24 * time.Hour}

// Calendar makes a fixed-window Policy count per calendar period in a time
// zone instead of per Window since the Unix epoch: "100,000 per calendar
// month in Europe/Berlin", "per billing period from the 17th". The
// decision's ResetAfter (RateLimit's t, X-RateLimit-Reset) is until the
// period's real end; Policy.Window, which RateLimit-Policy reports as w,
// must be the period's nominal length (Nominal).
type Calendar struct {
	// Period is the windows' length.
	Period Period
	// Location is the time zone whose midnights start the periods; nil is
	// UTC.
	Location *time.Location
	// FirstDay is the day a Week starts on (the zero value is Sunday).
	FirstDay time.Weekday
	// AnchorDay is the day of the month a Billing period starts on, 1–31.
	AnchorDay int
}

// Nominal is the length Policy.Window must have with this calendar: 24 h
// for a day, 7 days for a week, 30 days for a month or a billing period,
// 365 days for a year.
func (c *Calendar) Nominal() time.Duration {
	if c.Period == 0 || int(c.Period) >= len(nominal) {
		return 0
	}
	return nominal[c.Period]
}

// Same reports whether c and d count the same periods: both nil, or the
// same period, zone (by name), first day and anchor day.
func (c *Calendar) Same(d *Calendar) bool {
	if c == nil || d == nil {
		return c == d
	}
	zone := func(l *time.Location) string {
		if l == nil {
			return time.UTC.String()
		}
		return l.String()
	}
	return c.Period == d.Period && zone(c.Location) == zone(d.Location) && c.FirstDay == d.FirstDay && c.AnchorDay == d.AnchorDay
}

// Bounds returns the period that holds t: its first instant and the first
// instant of the next, in c's time zone. A midnight that a DST change
// skips starts its day at the first instant after it, a midnight it
// repeats at the first of the two, and a date skipped whole (Pacific/Apia,
// 2011-12-30) has no period: the day before ends where the day after
// starts.
func (c *Calendar) Bounds(t time.Time) (start, end time.Time) {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	y, m, d := t.Date()
	day := func(y int, m time.Month, d int) time.Time { return midnight(y, m, d, loc) }
	switch c.Period {
	case Day:
		return day(y, m, d), day(y, m, d+1)
	case Week:
		back := (int(t.Weekday()) - int(c.FirstDay) + 7) % 7
		return day(y, m, d-back), day(y, m, d-back+7)
	case Month:
		return day(y, m, 1), day(y, m+1, 1)
	case Year:
		return day(y, 1, 1), day(y+1, 1, 1)
	}
	// Billing: the anchor of this month, or of the one before if t is
	// earlier, to the anchor of the month after.
	anchor := func(y int, m time.Month) time.Time {
		last := day(y, m+1, 0).Day()
		return day(y, m, min(c.AnchorDay, last))
	}
	if start = anchor(y, m); t.Before(start) {
		start = anchor(y, m-1)
	}
	sy, sm, _ := start.Date()
	return start, anchor(sy, sm+1)
}

// midnight is the first instant of day d of month m (normalised as
// time.Date normalises) in loc. When a DST change skips that midnight,
// time.Date may answer an instant before the gap, on the day before
// (America/Santiago's 2010-10-10 gives 23:00 of the 9th), which would end
// the day before it is over (Pacific/Apia skipped 2011-12-30 whole): the
// first instant after the gap, where the zone in force that day starts,
// is the day's start instead.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // the date, normalised
	got := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
	zoneStart, zoneEnd := t.ZoneBounds()
	switch {
	case got.Equal(want):
		// A midnight a DST change repeats: the day starts at the first.
		_, off := t.Zone()
		_, before := zoneStart.Add(-time.Nanosecond).Zone()
		if back := time.Duration(before-off) * time.Second; back > 0 && t.Sub(zoneStart) < back {
			return t.Add(-back)
		}
		return t
	case got.Before(want): // before the gap: on the day before, or at a midnight of a day skipped whole
		return zoneEnd
	}
	return zoneStart // after the gap, on the day itself
}

// check reports what is wrong with c for policy p, or "".
func (c *Calendar) check(p *Policy) string {
	switch {
	case c.Period == 0 || int(c.Period) >= len(periodNames):
		return fmt.Sprintf("unknown calendar period %d", c.Period)
	case p.Algorithm != FixedWindow:
		return fmt.Sprintf("a calendar applies to fixed-window only, not %s", p.Algorithm)
	case c.Period == Billing && (c.AnchorDay < 1 || c.AnchorDay > 31):
		return fmt.Sprintf("a billing period's anchor day is 1–31, got %d", c.AnchorDay)
	case c.Period != Billing && c.AnchorDay != 0:
		return "an anchor day applies to a billing period only"
	case c.FirstDay < time.Sunday || c.FirstDay > time.Saturday:
		return fmt.Sprintf("unknown first day %d", c.FirstDay)
	case p.Window != c.Nominal():
		return fmt.Sprintf("window must be the %s's nominal length %v (what RateLimit-Policy's w reports), got %v", c.Period, c.Nominal(), p.Window)
	}
	return ""
}

// Span returns the µs since the Unix epoch of the start of the window that
// holds now (µs) and the window's length in µs: the calendar period's for
// a Policy with a Calendar, else the Window's multiple since the epoch.
func (p *Policy) Span(now int64) (start, length int64) {
	if p.Calendar == nil {
		w := p.Window.Microseconds()
		return now - now%w, w
	}
	s, e := p.Calendar.Bounds(time.UnixMicro(now))
	return s.UnixMicro(), e.UnixMicro() - s.UnixMicro()
}
