// Package envoyrls is Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService) on Floodgate's engine: a
// drop-in for envoyproxy/ratelimit that reads its configuration files
// unchanged.
//
// Load reads a file or a directory of files in envoyproxy/ratelimit's
// format (a domain and nested descriptors with key, value, rate_limit,
// shadow_mode, quota_mode, replaces, share_threshold and the metric
// flags), plus Floodgate's extensions in rate_limit: unit_multiplier,
// algorithm, window, burst and failure_mode. Domain.Validate checks a
// domain built in memory (from xDS, say) as Parse checks a file's.
// Compile makes each rate_limit an engine rule with one policy; Service
// answers ShouldRateLimit, deciding every descriptor of a request all or
// nothing (engine.DecideAll).
//
// Matching, replaces, costs (a descriptor's own hits_addend 0 checks
// only), shadow and quota mode, limit overrides, dynamic metadata and
// the LIMIT_RESPONSE_HEADERS_ENABLED headers are envoyproxy/ratelimit's:
// at each depth the entry's "key_value" name, then the first name ending
// in * that prefixes it, then the key alone, and only the limit at the
// depth of the descriptor's last entry applies. A request's partition key
// is its domain and entries, so every value of a key-only descriptor has
// its own counter. docs/ENVOY.md says what differs from
// envoyproxy/ratelimit, and scripts/ratelimit-diff.sh measures it.
package envoyrls
