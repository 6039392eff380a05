// Package header writes and parses the HTTP fields a rate limiter and its
// clients exchange (requirements H2–H5, C1):
//
//   - RateLimit-Policy and RateLimit of draft-ietf-httpapi-ratelimit-headers-11
//     (FormatPolicy, FormatLimit, ParsePolicy, ParseLimit), RFC 9651
//     Structured Field Lists whose items are named by sf-strings;
//   - Retry-After (FormatRetryAfter, ParseRetryAfter), RFC 9110 §10.2.3;
//   - the legacy X-RateLimit-Limit/-Remaining/-Reset trio (SetLegacy,
//     FormatLegacyReset, ParseLegacyReset);
//   - older draft shapes for clients: draft-06 separate fields, the draft-07
//     Dictionary, and Detect, which identifies the dialect a response uses;
//   - RFC 9457 problem details with the draft-11 problem types.
//
// Section references ("digest §1.2") point to docs/ratelimit-headers.md, the
// project's digest of the draft and neighbouring RFCs; vector IDs ("pol-12")
// to header/testdata/header-vectors.json, which the tests run in full.
//
// Units: quotas and remaining values are in the policy's quota unit
// (requests by default); every time value in the draft fields is whole
// seconds.
//
// Parsing is strict by default: any violation invalidates the whole field,
// because draft-11 says malformed fields MUST be ignored and defines no
// per-item recovery (digest §1.0, §1.12 point 4). The *Lenient variants
// accept the forms the vectors mark as tolerable (Token names and units,
// sloppy HTTP-dates) and flag what they accepted. Errors wrap ErrEmpty (the
// field is effectively absent), ErrSyntax (not a Structured Field) or
// ErrInvalid (breaks a field rule).
//
// Formatting emits only the product's canonical forms (digest §4): names as
// sf-strings, q always, w when not zero (a concurrency policy has none), qu only when not "requests", pk only when set;
// it rejects empty, non-printable or duplicate names and negative values.
// Formatting is hand-written for speed (it runs on every response); the
// tests check that the parser reads back exactly what it writes.
//
// The package imports no other Floodgate package, so both the server
// middleware and HTTP clients can use it.
package header
