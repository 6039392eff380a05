package server

import (
	"maps"
	"slices"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

// TestEveryStoreKindOpened: the server opens every kind of store the
// configuration accepts, and keeps reductions in each, and knows no
// other: a kind added on one side only fails here.
func TestEveryStoreKindOpened(t *testing.T) {
	want := slices.Sorted(slices.Values(config.StoreKinds()))
	if got := slices.Sorted(maps.Keys(storeOpeners)); !slices.Equal(got, want) {
		t.Errorf("storeOpeners open %q, config.StoreKinds() = %q", got, want)
	}
	if got := slices.Sorted(maps.Keys(reductionStores)); !slices.Equal(got, want) {
		t.Errorf("reductionStores keep %q, config.StoreKinds() = %q", got, want)
	}
}
