package header

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DateFormat says which HTTP-date form a value used (RFC 9110 §5.6.7).
type DateFormat uint8

const (
	NotADate    DateFormat = iota // the value was delay-seconds
	IMFFixdate                    // Sun, 06 Nov 1994 08:49:37 GMT (the only form senders generate)
	RFC850Date                    // Sunday, 06-Nov-94 08:49:37 GMT (obsolete)
	AsctimeDate                   // Sun Nov  6 08:49:37 1994 (obsolete)
)

func (f DateFormat) String() string {
	switch f {
	case IMFFixdate:
		return "IMF-fixdate"
	case RFC850Date:
		return "rfc850-date"
	case AsctimeDate:
		return "asctime-date"
	}
	return "delay-seconds"
}

// RetryAfter is a parsed Retry-After value (RFC 9110 §10.2.3, digest §3.2).
type RetryAfter struct {
	// Seconds is the delay-seconds value, saturated at math.MaxInt64 when
	// the digits do not fit (vector ra-09). Zero for an HTTP-date.
	Seconds int64
	// Saturated reports that Seconds was clamped.
	Saturated bool
	// Date is the HTTP-date in UTC; zero for delay-seconds.
	Date time.Time
	// Format is NotADate for delay-seconds, else the date form used.
	Format DateFormat
}

// IsDate reports whether the value was an HTTP-date.
func (ra RetryAfter) IsDate() bool { return ra.Format != NotADate }

// Delay returns how long to wait from now: delay-seconds as a Duration
// (saturating at the largest Duration, about 292 years) or the time until
// the date, never negative. Callers should still clamp it to their own cap
// (C3, vector ra-08).
func (ra RetryAfter) Delay(now time.Time) time.Duration {
	if ra.IsDate() {
		if d := ra.Date.Sub(now); d > 0 {
			return d
		}
		return 0
	}
	if ra.Seconds > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(ra.Seconds) * time.Second
}

// String returns the canonical serialisation: the delay-seconds digits, or
// the date as IMF-fixdate whatever form it was parsed from.
func (ra RetryAfter) String() string {
	if ra.IsDate() {
		return ra.Date.UTC().Format(imfLayout)
	}
	return strconv.FormatInt(ra.Seconds, 10)
}

const imfLayout = "Mon, 02 Jan 2006 15:04:05 GMT"

// FormatRetryAfter returns d as delay-seconds, rounded up to whole seconds
// and at least 1 (digest §4, H2): a client told "0" would retry at once into
// the same throttle.
func FormatRetryAfter(d time.Duration) string {
	return strconv.FormatInt(Seconds(d), 10)
}

// Seconds is d in whole seconds, rounded up and at least 1: a Retry-After
// delay, or a t or w of RateLimit (draft-11 §3), none of which may be 0
// while a limit applies.
func Seconds(d time.Duration) int64 { return max(1, CeilSeconds(d)) }

// CeilSeconds is d in whole seconds, rounded up: the unit of Retry-After
// (RFC 9110 §10.2.3) and of RateLimit's t and w (draft-11 §3).
func CeilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// ParseRetryAfter parses a Retry-After value strictly (RFC 9110 §10.2.3)
// and returns the delay from now (see RetryAfter.Delay). Surrounding
// spaces and tabs are trimmed (ra-10). HTTP-dates must match the grammar
// exactly: case-sensitive names, literal GMT, a day-name that matches the
// date, a real calendar date — stricter than net/http.ParseTime (digest
// §3.2; vectors ra-17…ra-21). Errors wrap ErrInvalid.
func ParseRetryAfter(value string, now time.Time) (time.Duration, error) {
	ra, err := ParseRetryAfterDetail(value, now, false)
	if err != nil {
		return 0, err
	}
	return ra.Delay(now), nil
}

// ParseRetryAfterLenient is ParseRetryAfter that, for HTTP-dates, also
// accepts names in any letter case (ra-18), the zones "UTC", "+0000" and
// "-0000" instead of "GMT" (ra-17) and a day-name that does not match the
// date (ra-20) — roughly what net/http.ParseTime accepts, plus UTC.
func ParseRetryAfterLenient(value string, now time.Time) (time.Duration, error) {
	ra, err := ParseRetryAfterDetail(value, now, true)
	if err != nil {
		return 0, err
	}
	return ra.Delay(now), nil
}

// ParseRetryAfterDetail parses a Retry-After value and says what it was.
// now is needed to place two-digit rfc850 years: a year more than 50 years
// after now means the most recent past year with those digits (RFC 9110
// §5.6.7). lenient is as for ParseRetryAfterLenient.
func ParseRetryAfterDetail(value string, now time.Time, lenient bool) (RetryAfter, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return RetryAfter{}, invalidf("Retry-After: empty value")
	}
	if isDigits(v) {
		n, sat := parseDigitsSaturating(v)
		return RetryAfter{Seconds: n, Saturated: sat}, nil
	}
	t, f, err := parseHTTPDate(v, now, lenient)
	if err != nil {
		return RetryAfter{}, err
	}
	return RetryAfter{Date: t, Format: f}, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseDigitsSaturating reads a run of ASCII digits, clamping at MaxInt64
// instead of wrapping.
func parseDigitsSaturating(s string) (n int64, saturated bool) {
	for i := 0; i < len(s); i++ {
		d := int64(s[i] - '0')
		if n > (math.MaxInt64-d)/10 {
			return math.MaxInt64, true
		}
		n = n*10 + d
	}
	return n, false
}

var (
	shortDays = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	longDays  = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months    = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

func errDate(v string, why string) error {
	return invalidf("Retry-After %q: neither delay-seconds nor HTTP-date (%s)", v, why)
}

// parseHTTPDate parses the three HTTP-date forms by position; they are
// fixed-width apart from the rfc850 day-name.
func parseHTTPDate(v string, now time.Time, lenient bool) (time.Time, DateFormat, error) {
	eq := func(a, b string) bool {
		if lenient {
			return strings.EqualFold(a, b)
		}
		return a == b
	}
	lookup := func(names []string, s string) int {
		for i, n := range names {
			if eq(n, s) {
				return i
			}
		}
		return -1
	}
	zoneOK := func(z string) bool {
		if z == "GMT" {
			return true
		}
		return lenient && (z == "UTC" || z == "+0000" || z == "-0000")
	}
	var (
		wd, day, mon, year int
		clock              string
		format             DateFormat
		ok                 bool
	)
	switch {
	case len(v) >= 5 && v[3] == ',' && v[4] == ' ': // IMF-fixdate
		r := v[5:]
		if len(r) < 21 || r[2] != ' ' || r[6] != ' ' || r[11] != ' ' || r[20] != ' ' || !zoneOK(r[21:]) {
			return time.Time{}, 0, errDate(v, "not IMF-fixdate")
		}
		wd, mon = lookup(shortDays[:], v[:3]), lookup(months[:], r[3:6])
		day, ok = num(r[0:2])
		if y, ok2 := num(r[7:11]); ok && ok2 {
			year = y
		} else {
			ok = false
		}
		clock, format = r[12:20], IMFFixdate
	case len(v) == 24 && v[3] == ' ': // asctime-date
		if v[7] != ' ' || v[10] != ' ' || v[19] != ' ' {
			return time.Time{}, 0, errDate(v, "not asctime-date")
		}
		wd, mon = lookup(shortDays[:], v[:3]), lookup(months[:], v[4:7])
		d := v[8:10]
		if d[0] == ' ' {
			d = d[1:]
		}
		day, ok = num(d)
		if y, ok2 := num(v[20:24]); ok && ok2 {
			year = y
		} else {
			ok = false
		}
		clock, format = v[11:19], AsctimeDate
	default: // rfc850-date
		i := strings.Index(v, ", ")
		if i < 0 {
			return time.Time{}, 0, errDate(v, "unknown form")
		}
		r := v[i+2:]
		if len(r) < 19 || r[2] != '-' || r[6] != '-' || r[9] != ' ' || r[18] != ' ' || !zoneOK(r[19:]) {
			return time.Time{}, 0, errDate(v, "not rfc850-date")
		}
		wd, mon = lookup(longDays[:], v[:i]), lookup(months[:], r[3:6])
		day, ok = num(r[0:2])
		yy, ok2 := num(r[7:9])
		ok = ok && ok2
		year = now.UTC().Year()/100*100 + yy
		if year > now.UTC().Year()+50 {
			year -= 100
		}
		clock, format = r[10:18], RFC850Date
	}
	if !ok || mon < 0 || wd < 0 {
		return time.Time{}, 0, errDate(v, "bad day, month, year or day-name")
	}
	if len(clock) != 8 || clock[2] != ':' || clock[5] != ':' {
		return time.Time{}, 0, errDate(v, "bad time of day")
	}
	hh, ok1 := num(clock[0:2])
	mm, ok2 := num(clock[3:5])
	ss, ok3 := num(clock[6:8])
	// Second 60 is a leap second (RFC 5322 §3.3); time.Date normalises it.
	if !ok1 || !ok2 || !ok3 || hh > 23 || mm > 59 || ss > 60 {
		return time.Time{}, 0, errDate(v, "time of day out of range")
	}
	midnight := time.Date(year, time.Month(mon+1), day, 0, 0, 0, 0, time.UTC)
	if day < 1 || midnight.Day() != day {
		return time.Time{}, 0, errDate(v, "day is out of range for month")
	}
	if !lenient && int(midnight.Weekday()) != wd {
		return time.Time{}, 0, errDate(v, fmt.Sprintf("day-name does not match the date (a %s)", midnight.Weekday()))
	}
	return midnight.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second), format, nil
}

// num parses 1 to 4 ASCII digits.
func num(s string) (int, bool) {
	if !isDigits(s) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
