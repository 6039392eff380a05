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

// Reserve admits a call to a language model against its estimate (the
// max_tokens it asks for) and Settle charges what the answer used: here
// 1,200 of 4,000 reserved tokens (2,800 given back), then an answer that
// used 30,000 where 4,000 were reserved, counted in full. The key is then
// in debt on its per-minute budget: 31,200 spent of 20,000, so a call of
// 4,000 waits until refill has brought the debt down to 16,000 (45.6 s).
func ExampleLimiter_Reserve() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := floodgate.NewLimiter(store, []floodgate.Policy{
		{Name: "tokens-month", Algorithm: floodgate.FixedWindow, Quota: 1_000_000, Window: 30 * 24 * time.Hour,
			Calendar: &floodgate.Calendar{Period: floodgate.Month, Location: berlin}},
		{Name: "tokens-minute", Algorithm: floodgate.TokenBucket, Quota: 20_000, Window: time.Minute},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	call := func(maxTokens, used int64) {
		r, err := limiter.Reserve(ctx, "key-alice", floodgate.Cost{Requests: maxTokens})
		if err != nil {
			log.Fatal(err)
		}
		if !r.Decision.Allowed {
			fmt.Printf("refused: %s, retry in %v\n", r.Decision.Policy.Name, r.Decision.RetryAfter.Round(time.Second))
			return
		}
		d, err := r.Settle(ctx, floodgate.Cost{Requests: used}) // usage.total_tokens of the answer
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("used %d: %s has %d left\n", used, d.Policy.Name, d.Remaining)
	}
	call(4_000, 1_200)
	call(4_000, 30_000)
	call(4_000, 1_000)
	// Output:
	// used 1200: tokens-minute has 18800 left
	// used 30000: tokens-minute has 0 left
	// refused: tokens-minute, retry in 46s
}
