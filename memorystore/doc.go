// Package memorystore is an in-process floodgate.Store built on package
// algorithm: for one process, tests, and the local fallback of a shared
// store.
//
// Each key has an entry with a lock of its own, found without any other
// lock, so decisions for different keys share nothing; keys are spread over
// shards whose locks order only new keys and removals. The default clock
// reads only the monotonic clock (a wall clock stepped by NTP does not
// disturb it). Each key holds a short list of per-policy states; a state
// whose Expires has passed equals a fresh one, so expired keys are ignored
// on access and dropped by a sweeper goroutine (stopped by Close). MaxKeys
// bounds memory: once that many keys are held, inserting a new key evicts a
// sampled key with the earliest expiry, counted by Evictions. Evicting a live key
// forgets its usage, which favours that client, so size MaxKeys above the
// number of clients you expect within a window.
//
//	store, err := memorystore.New() // options: WithMaxKeys, WithShards, WithSweepInterval, WithClock
//	if err != nil {
//		log.Fatal(err) // an option out of range
//	}
//	defer store.Close()
//	limiter, err := floodgate.NewLimiter(store, []floodgate.Policy{{
//		Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Minute,
//	}})
package memorystore
