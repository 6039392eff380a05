// Package envoyrls is Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService) on Floodgate's engine: a
// drop-in for envoyproxy/ratelimit that reads its configuration files
// unchanged.
//
// Load reads a file or a directory of files in envoyproxy/ratelimit's
// format (a domain and nested descriptors with key, value — a trailing *
// is a prefix wildcard — rate_limit, shadow_mode, replaces and
// detailed_metric), plus Floodgate's extensions in rate_limit:
// algorithm, window, burst and failure_mode. Compile makes each
// rate_limit an engine rule with one policy; Service answers
// ShouldRateLimit, deciding every descriptor of a request all or nothing
// (engine.DecideAll).
//
// The most specific match wins as envoyproxy/ratelimit has it: at each
// depth key and value, then a wildcard, then the key alone, and only the
// limit at the depth of the descriptor's last entry applies. A request's
// partition key is its domain and entries, so every value of a key-only
// descriptor has its own counter. docs/ENVOY.md says what differs from
// envoyproxy/ratelimit.
package envoyrls
