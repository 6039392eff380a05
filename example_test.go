package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
)

// Wait paces calls to an upstream that allows 5 per second, one at a time,
// and refuses at once a call that could not start before its deadline.
func ExampleLimiter_Wait() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := floodgate.NewLimiter(store, []floodgate.Policy{
		{Name: "upstream", Algorithm: floodgate.GCRA, Quota: 5, Window: time.Second, Burst: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	for range 2 {
		if _, err := limiter.Wait(context.Background(), "partner-api", 1); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("second call after 200ms:", time.Since(start) >= 200*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	d, err := limiter.Wait(ctx, "partner-api", 1)
	fmt.Println("refused at once:", errors.Is(err, floodgate.ErrWaitExceedsDeadline), d.RetryAfter > 20*time.Millisecond)
	// Output:
	// second call after 200ms: true
	// refused at once: true true
}

// Options are checked together when the Limiter is made: here a local
// fallback, which means fail-to-local, beside a failure mode saying
// fail-open.
func ExampleNewLimiter_options() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	local, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	defer local.Close()
	_, err = floodgate.NewLimiter(store, []floodgate.Policy{
		{Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Minute},
	}, floodgate.WithLocalFallback(local, 0.5), floodgate.WithFailureMode(floodgate.FailOpen))
	fmt.Println(errors.Is(err, floodgate.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// floodgate: invalid option: WithLocalFallback sets fail-to-local, but WithFailureMode says fail-open
}
