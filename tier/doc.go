// Package tier gives each API key the limits of its pricing tier
// (REQUIREMENTS K6): a Source resolves a key to its tenant, tier and
// policies; a Cache keeps answers in memory so a warm key costs no query;
// Plan plugs a Source into httplimit.Rule.Plan.
//
// Keys are only ever handled as SHA-256 hashes past the request header:
// sources, the cache, the database and logs see a Hash, never the secret.
//
// Two sources ship here: Static, built from configuration, and Postgres,
// reading the api_keys and tier_policies tables that Migrate creates. A
// typical daemon wires them as
//
//	src := tier.NewCache(tier.NewPostgres(pool), tier.CacheOptions{})
//	rule := httplimit.Rule{
//		Pattern:  "/api/",
//		Policies: []floodgate.Policy{ipGuard}, // by client IP, before any lookup (K7)
//		Plan:     tier.Plan(src, tier.PlanOptions{}),
//	}
//
// Missing keys are refused with 401 api_key_required and unknown or
// disabled keys with 401 invalid_api_key; when the source fails, the plain
// error Plan returns leaves the answer to the rule's FailureMode.
package tier
