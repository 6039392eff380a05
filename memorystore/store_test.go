package memorystore_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) floodgate.Store {
		st := memorystore.New(memorystore.WithClock(now))
		t.Cleanup(func() { st.Close() })
		return st
	})
}
