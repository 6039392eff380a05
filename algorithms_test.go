package floodgate_test

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate"
)

// TestAlgorithms: the one list of algorithms holds every constant, in
// order, each with a name that parses back; the slice is the caller's.
func TestAlgorithms(t *testing.T) {
	all := floodgate.Algorithms()
	if got := fmt.Sprint(all); got != "[fixed-window sliding-window-log sliding-window-counter token-bucket gcra anchored-window]" {
		t.Errorf("Algorithms() = %s", got)
	}
	for _, a := range all {
		if b, err := floodgate.ParseAlgorithm(a.String()); err != nil || b != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a, b, err)
		}
	}
	all[0] = 0
	if floodgate.Algorithms()[0] != floodgate.FixedWindow {
		t.Error("a caller's change reached the list")
	}
	if _, err := floodgate.ParseAlgorithm(floodgate.Algorithm(len(all) + 1).String()); err == nil {
		t.Error("an algorithm past the list parses")
	}
}
