package memorystore

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestTableRandomOps plays random inserts and removals against a Go map.
// Homes are drawn from the last 16 slots of the table, whatever its size,
// so that probe runs are long, collide and wrap around the table's end,
// where backward-shift deletion is easiest to get wrong.
func TestTableRandomOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab *table
	n := 0
	want := map[string]uint64{} // key -> hash
	for step := range 20_000 {
		key := "k" + strconv.Itoa(rng.IntN(300))
		hash, held := want[key]
		if !held {
			hash = ^uint64(rng.IntN(16)) // low bits all ones but the last four: the table's last slots
		}
		e, i := tab.find(hash, key)
		if (e != nil) != held {
			t.Fatalf("step %d: find(%q) = %v, want held = %v", step, key, e, held)
		}
		if held {
			tab.remove(i)
			n--
			delete(want, key)
		} else {
			if (n+1)*4 > tab.size()*3 {
				tab = tab.rehash(max(minSlots, 2*tab.size()))
			}
			tab.place(newEntry(hash, key, node{}))
			n++
			want[key] = hash
		}
		if step%500 == 0 {
			checkTable(t, tab, want)
		}
	}
	checkTable(t, tab, want)
}

// checkTable checks that tab holds exactly want, each key reachable.
func checkTable(t *testing.T, tab *table, want map[string]uint64) {
	t.Helper()
	count := 0
	for i := range tab.slots {
		if tab.slots[i].Load() != nil {
			count++
		}
	}
	if count != len(want) {
		t.Fatalf("table holds %d entries, want %d", count, len(want))
	}
	for k, h := range want {
		if e, _ := tab.find(h, k); e == nil || !e.is(h, k) {
			t.Fatalf("key %q is held but not found", k)
		}
	}
}

// TestEntryKey: keys up to 24 bytes live in the entry, longer ones beside
// it; either way only the same key with the same hash matches.
func TestEntryKey(t *testing.T) {
	for _, key := range []string{"", "a", "203.0.113.7", "exactly-24-bytes-long-ok", "twenty-five-bytes-long-ok", "a much longer key, an API key perhaps: 0123456789abcdef"} {
		e := newEntry(7, key, node{})
		if !e.is(7, key) {
			t.Errorf("%q: entry does not match its own key", key)
		}
		if e.is(8, key) || e.is(7, key+"x") || (key != "" && e.is(7, key[1:])) {
			t.Errorf("%q: entry matches another key or hash", key)
		}
	}
}

// TestTableRemoveAcrossEnd: a probe run that wraps past the table's last
// slot closes up when its first entry is removed.
func TestTableRemoveAcrossEnd(t *testing.T) {
	tab := (*table)(nil).rehash(16)
	const home = ^uint64(0) // slot 15 in a table of 16
	for i := range 5 {
		tab.place(newEntry(home, "k"+strconv.Itoa(i), node{})) // slots 15, 0, 1, 2, 3
	}
	if _, i := tab.find(home, "k4"); i != 3 {
		t.Fatalf("k4 at slot %d, want 3 (the run wraps)", i)
	}
	_, i := tab.find(home, "k0")
	tab.remove(i)
	for j, want := range []int{15, 0, 1, 2} { // k1..k4, each moved back one slot
		if _, got := tab.find(home, "k"+strconv.Itoa(j+1)); got != want {
			t.Fatalf("k%d at slot %d after the removal, want %d", j+1, got, want)
		}
	}
	if tab.slots[3].Load() != nil {
		t.Fatal("slot 3 still occupied after the run closed up")
	}
}
