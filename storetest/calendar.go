package storetest

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// calendarScripts are fixed windows of calendar periods (floodgate.Calendar):
// a month in Europe/Berlin across January's end into a February of 28
// days, and a day in America/New_York across the spring DST change (23
// hours), with ResetAfter to the period's real end.
func calendarScripts(t *testing.T) []script {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	month := floodgate.Policy{Name: "month", Algorithm: floodgate.FixedWindow, Quota: 3, Window: 30 * 24 * time.Hour,
		Calendar: &floodgate.Calendar{Period: floodgate.Month, Location: berlin}}
	day := floodgate.Policy{Name: "day", Algorithm: floodgate.FixedWindow, Quota: 3, Window: 24 * time.Hour,
		Calendar: &floodgate.Calendar{Period: floodgate.Day, Location: ny}}
	since := func(loc *time.Location, m time.Month, d, h, min int) time.Duration {
		return time.Date(2026, m, d, h, min, 0, 0, loc).Sub(Epoch)
	}
	const h = time.Hour
	return []script{
		{name: "CalendarMonth", policies: []floodgate.Policy{month}, steps: []step{
			// 23:00 on 31 January in Berlin: an hour to 1 February.
			{at: since(berlin, 1, 31, 23, 0), cost: 3, want: []want{ok(0, h)}},
			{at: since(berlin, 1, 31, 23, 30), cost: 1, want: []want{deny(0, h/2, h/2)}},
			step{at: since(berlin, 1, 31, 23, 40), cost: 5, want: []want{ok(0, 20*time.Minute)}}.post(),
			// February starts empty (the debt ended with January), and ends
			// 28 days on.
			{at: since(berlin, 2, 1, 0, 0), cost: 1, want: []want{ok(2, 28*24*h)}},
			// A refund of January's spending does not reach February.
			step{at: since(berlin, 2, 1, 1, 0), cost: 1, want: []want{ok(2, 28*24*h-h)}}.refund(since(berlin, 1, 31, 23, 0)),
			step{at: since(berlin, 2, 1, 2, 0), cost: 1, want: []want{ok(3, 28*24*h-2*h)}}.refund(since(berlin, 2, 1, 0, 0)),
		}},
		{name: "CalendarDayDST", policies: []floodgate.Policy{day}, steps: []step{
			// 8 March in New York has 23 hours.
			{at: since(ny, 3, 8, 0, 0), cost: 1, want: []want{ok(2, 23*h)}},
			{at: since(ny, 3, 8, 3, 0), cost: 2, want: []want{ok(0, 21*h)}}, // 03:00 EDT is 2 h on
			{at: since(ny, 3, 8, 23, 0), cost: 1, want: []want{deny(0, h, h)}},
			{at: since(ny, 3, 9, 0, 0), cost: 1, want: []want{ok(2, 24*h)}},
		}},
	}
}
