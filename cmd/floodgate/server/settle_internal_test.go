package server

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// TestReservationsBounded: a caller reserving without settling fills at
// most maxReservations; past that a check gets no id (its cost stands),
// and once the held ones expire, ids are given again.
func TestReservationsBounded(t *testing.T) {
	var rs reservations
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxReservations {
		if rs.hold(engine.Outcome{}, 1, at) == "" {
			t.Fatalf("hold %d refused below the bound", i)
		}
	}
	if id := rs.hold(engine.Outcome{}, 1, at.Add(time.Second)); id != "" || len(rs.m) != maxReservations {
		t.Fatalf("past the bound: id %q, %d held; want none, %d", id, len(rs.m), maxReservations)
	}
	later := at.Add(floodgate.DefaultSettleWithin + time.Second)
	id := rs.hold(engine.Outcome{}, 1, later)
	if id == "" || len(rs.m) != 1 {
		t.Fatalf("after the held expired: id %q, %d held; want one", id, len(rs.m))
	}
	if _, ok := rs.take(id, later); !ok {
		t.Fatal("the new reservation cannot be taken")
	}
}
