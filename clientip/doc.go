// Package clientip finds the client address a rate limiter keys on
// (requirement K2): the socket peer, unless the peer is a configured
// trusted proxy — only then are X-Forwarded-For, Forwarded (RFC 7239),
// X-Real-IP or CF-Connecting-IP believed, so a client can never choose its
// own key.
//
// List headers are walked from the right, skipping trusted proxies, using
// the strategies of github.com/realclientip/realclientip-go; anything that
// cannot be read (garbage, "unknown", obfuscated Forwarded nodes, every hop
// trusted) falls back to the peer rather than being skipped (digest §3.4,
// §3.5 in docs/ratelimit-headers.md).
//
// Addresses are normalised before keying: IPv4-mapped IPv6 becomes IPv4,
// zones and ports are dropped. With Config.GroupIPv6 an IPv6 client is keyed
// by its prefix (default /64), because one end site normally owns a whole
// /64 and could otherwise rotate addresses to escape its limit.
//
// The untrusted-peer path, which is what a directly exposed server sees,
// does not allocate; Key allocates only its result string.
package clientip
