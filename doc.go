// Package floodgate limits how fast each client may use a service: a
// Limiter applies one or more policies (a quota per window under one of
// six algorithms: fixed window, sliding window log, sliding window
// counter, token bucket, GCRA and anchored window) to partition keys, deciding all policies
// of a request at once, all or nothing, through a Store (package
// memorystore in one process, redisstore across many).
//
//	store, err := memorystore.New()
//	if err != nil {
//		log.Fatal(err) // an invalid option
//	}
//	defer store.Close()
//	limiter, err := floodgate.NewLimiter(store, []floodgate.Policy{
//		{Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Minute},
//	})
//	if err != nil {
//		log.Fatal(err) // an invalid policy or option
//	}
//	d, err := limiter.Take(ctx, "client-42", 1)
//	if err != nil {
//		return err // the store failed (FailClosed)
//	}
//	if !d.Allowed {
//		// refuse, and say when to come back: d.RetryAfter
//	}
//
// Take answers at once; Wait instead sleeps until the request is admitted,
// for work that should slow down rather than fail. Every Decision carries
// the remaining quota and the reset and retry-after times that an HTTP
// layer writes as RateLimit and Retry-After fields (package httplimit).
// NewLimiter documents how its options combine, among them the failure
// mode: what a Limiter answers while its store is down.
package floodgate
