// Package client is an HTTP client side for rate-limited APIs: an
// http.RoundTripper that slows down by the RateLimit signals a service
// sends, without letting wrong or hostile values push it into a flood
// (REQUIREMENTS C1–C8; draft-ietf-httpapi-ratelimit-headers-11 §7, §8).
//
//	c, err := client.New(client.WithRate(20, 5), client.WithMaxWait(30*time.Second))
//	if err != nil {
//		return err // an option out of range: the error names it and its value
//	}
//	resp, err := c.Get("https://api.example.com/items")
//
// What it reads (C1), through package header: RateLimit and
// RateLimit-Policy of draft-08…11, the draft-07 Dictionary and draft-06
// fields (detected by the digest's §2.5 procedure), legacy X-RateLimit-*
// with epoch or delta reset, Retry-After as delay-seconds or HTTP-date,
// and RFC 9457 problem+json bodies with the draft's three problem types.
// Malformed fields are ignored as a whole; values on responses served
// from a cache (Age > 0) are ignored. Extract and ReadProblem expose this
// step on its own.
//
// Safety rules it enforces:
//
//   - Local caps no server value can raise (C3): requests per second
//     (golang.org/x/time/rate), requests in flight, request-body bytes per
//     second. Every attempt, retries included, counts (C7).
//   - Server signals only lower the pace (C2, C3): the pace a RateLimit
//     item permits is r/t clamped by its policy's q/w (draft-11 §8), then
//     by the local caps. r is a hint, never a grant. Outliers — t beyond
//     the maximum window (ten minutes by default), t = 0 with r > 0, r
//     above the maximum or above the policy's q — are logged and ignored.
//   - No single sleep exceeds the maximum wait: server time values are
//     clamped to it, and a longer request turns into one probe per maximum
//     wait (draft-11 §7).
//   - State is kept per origin, policy name and partition key (C6). An
//     observation expires after t (C4); the next request is then a probe
//     that goes alone, after a jittered wait when the client was held
//     back; the pace factor restarts at one half and grows additively per
//     success, and is halved by every 429 or rate-limit problem type
//     (AIMD).
//   - Retries only for idempotent requests (GET, HEAD, OPTIONS, PUT,
//     DELETE, or any request with Idempotency-Key) whose body can be
//     replayed through GetBody, at most MaxAttempts, after Retry-After —
//     which takes precedence over t — plus jitter (C5).
//   - A circuit breaker per origin (github.com/sony/gobreaker/v2) opens on
//     consecutive 5xx responses and transport errors, independent of the
//     rate signals (C4).
//   - One audit record per observation through log/slog (C8).
//
// Probe backs the `floodgate probe URL` command. docs/CLIENT.md describes
// every option with its default, unit and range; an option out of range
// makes New and NewTransport return an error wrapping
// floodgate.ErrInvalidOption.
package client
