package lease_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/lease"
	"github.com/floodgate/floodgate/memorystore"
)

// A Limiter in lease mode: a hot key's decisions come from a local lease,
// refreshed from the store (Redis, in production) at most every 10 ms.
func Example() {
	inner, err := memorystore.New() // redisstore.New(rdb) to share the quota
	if err != nil {
		log.Fatal(err)
	}
	defer inner.Close()
	leased, err := lease.New(inner, 10*time.Millisecond, nil)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := floodgate.NewLimiter(leased, []floodgate.Policy{{Name: "hot", Algorithm: floodgate.TokenBucket, Quota: 100_000, Window: time.Second}})
	if err != nil {
		log.Fatal(err)
	}
	admitted := 0
	for range 1000 {
		d, err := lim.Take(context.Background(), "tenant-1", 1)
		if err != nil {
			log.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	// The first lease is the policy's rate for 10 ms: 1,000 requests.
	fmt.Println(admitted, "admitted,", leased.StoreCalls(), "store call")
	// Output: 1000 admitted, 1 store call
}
