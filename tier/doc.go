// Package tier gives each API key the limits of its pricing tier
// (REQUIREMENTS K6): a Source resolves a key to its tenant, tier and
// policies; a Cache keeps answers in memory so a warm key costs no query.
// It is data and lookups only: package tierhttp plugs a Source into
// httplimit.Rule.Plan.
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
//		Pattern: "/api/",
//		Rule:    engine.Rule{Policies: []floodgate.Policy{ipGuard}}, // by client IP, before any lookup (K7)
//		Plan:    tierhttp.Plan(src, tierhttp.PlanOptions{}),
//	}
package tier
