// Package tierhttp is the HTTP side of API-key tiers: Plan reads a
// request's API key, looks its tier up in a tier.Source and gives
// httplimit.Rule.Plan the tier's limits, refusing a missing or unknown
// key with 401 problem+json.
//
//	src := tier.NewCache(tier.NewPostgres(pool), tier.CacheOptions{})
//	rule := httplimit.Rule{
//		Pattern: "/api/",
//		Rule:    engine.Rule{Policies: []floodgate.Policy{ipGuard}}, // by client IP, before any lookup (K7)
//		Plan:    tierhttp.Plan(src, tierhttp.PlanOptions{}),
//	}
//
// Missing keys are refused with 401 api_key_required and unknown or
// disabled keys with 401 invalid_api_key; when the source fails, the plain
// error Plan returns leaves the answer to the rule's FailureMode.
package tierhttp
