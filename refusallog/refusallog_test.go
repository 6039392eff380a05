package refusallog

import (
	"fmt"
	"testing"
	"time"
)

// TestAdmit: one record per rule and key per interval, the next counting
// those held back; another rule or key has its own; past maxKeys new keys
// share one record per rule; a negative interval lets every refusal through.
func TestAdmit(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := New(0, func() time.Time { return now })
	type rec struct {
		n  int64
		ok bool
	}
	admit := func(rule, key string) rec { n, ok := l.Admit(rule, key); return rec{n, ok} }
	got := []rec{admit("r", "a"), admit("r", "a"), admit("r", "a"), admit("s", "a"), admit("r", "b")}
	now = now.Add(DefaultInterval)
	got = append(got, admit("r", "a"), admit("r", "a"))
	want := []rec{{0, true}, {0, false}, {0, false}, {0, true}, {0, true}, {2, true}, {0, false}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %v, want %v", got, want)
	}

	full := New(time.Minute, func() time.Time { return now })
	for i := range maxKeys {
		full.Admit("r", fmt.Sprint(i))
	}
	if _, ok := full.Admit("r", "new-1"); !ok {
		t.Error("the first key past maxKeys: no record")
	}
	if _, ok := full.Admit("r", "new-2"); ok {
		t.Error("a second key past maxKeys within the interval got a record of its own")
	}
	every := New(-1, nil)
	for range 3 {
		if _, ok := every.Admit("r", "a"); !ok {
			t.Error("a negative interval held a record back")
		}
	}
}
