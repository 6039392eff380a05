// Package engine decides a request's rate limits, whatever door it came
// through. A door — the net/http middleware, the daemon's gateway,
// forward-auth and decision API, or a gRPC service — matches a rule,
// builds the partition key, measures the request's costs and asks the
// engine; it turns the Outcome into its protocol and nothing more.
//
// For one request the engine, in this order: refuses a key the Blocker
// holds; takes the rule's in-flight slots; decides every rate policy of
// the rule in one store call, all or nothing across units (requests and
// content bytes alike), with any capacity reduction applied; then, for a
// plan, the plan's slots and policies under the plan's key; waits in
// arrival order where the rule throttles; turns a shadow rule's denial
// into an admission; releases what it took when the request is refused;
// and reports one Event to the Observer.
//
//	store, _ := memorystore.New()
//	eng, _ := engine.New(engine.Config{Store: store})
//	login, _ := eng.Compile(engine.Rule{Name: "login", Policies: policies})
//	out := login.Decide(ctx, engine.Request{Key: clientIP, Cost: floodgate.Cost{Requests: 1}})
//	defer out.Release()
//	if out.Verdict != engine.Allowed { /* refuse, with out.RetryAfter */ }
package engine
