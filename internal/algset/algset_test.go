package algset

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

func TestSet(t *testing.T) {
	buckets := Set(func(a floodgate.Algorithm) bool { return a == floodgate.TokenBucket || a == floodgate.GCRA })
	if err := buckets.Missing([]floodgate.Algorithm{floodgate.GCRA, floodgate.TokenBucket}, "s", "x"); err != nil {
		t.Error(err)
	}
	err := buckets.Missing(floodgate.Algorithms(), "somestore", "its table (somestore/table.go)")
	if want := "somestore: no decision for algorithm fixed-window: add it to its table (somestore/table.go)"; err == nil || err.Error() != want {
		t.Errorf("Missing = %v, want %q", err, want)
	}
	ps := []floodgate.Policy{{Name: "b", Algorithm: floodgate.GCRA, Quota: 1, Window: time.Second}, {Name: "w", Algorithm: floodgate.FixedWindow}}
	err = buckets.Refuse("somestore", ps)
	if !errors.Is(err, floodgate.ErrInvalidPolicy) || err.Error() != `floodgate: invalid policy: somestore: policy "w": algorithm fixed-window` {
		t.Errorf("Refuse = %v", err)
	}
	if err := buckets.Refuse("somestore", ps[:1]); err != nil {
		t.Errorf("Refuse of a bucket = %v", err)
	}
}
