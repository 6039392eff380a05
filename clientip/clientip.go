package clientip

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/realclientip/realclientip-go"
)

// Source is a request header that may carry the client address.
type Source uint8

const (
	// XForwardedFor is walked right to left, skipping trusted proxies.
	XForwardedFor Source = iota + 1
	// Forwarded (RFC 7239) for= values, walked like XForwardedFor.
	Forwarded
	// XRealIP is a single-address header set by the proxy.
	XRealIP
	// CFConnectingIP is Cloudflare's single-address header.
	CFConnectingIP
)

func (s Source) header() string {
	switch s {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	case XRealIP:
		return "X-Real-Ip"
	case CFConnectingIP:
		return "Cf-Connecting-Ip"
	}
	return ""
}

func (s Source) String() string {
	if h := s.header(); h != "" {
		return h
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// DefaultIPv6PrefixBits is the grouping prefix used when Config.GroupIPv6 is
// set without a length: one end site usually owns a whole /64.
const DefaultIPv6PrefixBits = 64

// Config configures a Resolver.
type Config struct {
	// TrustedProxies lists the proxies (CIDRs such as "10.0.0.0/8" or
	// single addresses) whose headers are believed. Empty means no header
	// is ever believed and the socket peer is always the client (K2).
	TrustedProxies []string
	// Sources are the headers believed from a trusted peer, in order of
	// preference; the first one present in the request decides. Nil means
	// {XForwardedFor}. List only headers your proxies set or overwrite: a
	// header a proxy passes through untouched is whatever the client wrote.
	Sources []Source
	// GroupIPv6 keys IPv6 clients by prefix instead of by address, so a
	// host cannot rotate through the addresses of its own network.
	GroupIPv6 bool
	// IPv6PrefixBits is the grouping prefix length (1–128); 0 means
	// DefaultIPv6PrefixBits. Ignored unless GroupIPv6 is set.
	IPv6PrefixBits int
	// TrustSocketPeers counts a peer without an IP address, as on a
	// Unix-socket listener (RemoteAddr "@" or ""), as a trusted proxy, so
	// that Sources are believed: set it when only your local proxy can
	// reach the socket. Without it such a request has no client address
	// (ErrNoPeer).
	TrustSocketPeers bool
}

type source struct {
	header string
	strat  realclientip.Strategy
}

// Resolver finds the client address of a request (K2). It is safe for
// concurrent use.
type Resolver struct {
	trusted []netip.Prefix
	sources []source
	v6bits  int // 0: no grouping
	socket  bool
}

// ErrNoPeer is returned when the request's RemoteAddr is not an IP address
// (for example a Unix socket) and so no client address can be derived.
var ErrNoPeer = errors.New("clientip: RemoteAddr is not an IP address")

// New builds a Resolver. It fails on a malformed proxy address or CIDR, an
// unknown or repeated Source, or an IPv6 prefix length outside 1–128.
func New(cfg Config) (*Resolver, error) {
	r := &Resolver{socket: cfg.TrustSocketPeers}
	nets := make([]net.IPNet, 0, len(cfg.TrustedProxies))
	for _, s := range cfg.TrustedProxies {
		p, err := ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("clientip: trusted proxy %q: %w", s, err)
		}
		r.trusted = append(r.trusted, p)
		bits := 32
		if p.Addr().Is6() {
			bits = 128
		}
		nets = append(nets, net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)})
	}
	srcs := cfg.Sources
	if srcs == nil {
		srcs = []Source{XForwardedFor}
	}
	seen := map[Source]bool{}
	for _, s := range srcs {
		if seen[s] {
			return nil, fmt.Errorf("clientip: source %v listed twice", s)
		}
		seen[s] = true
		var (
			strat realclientip.Strategy
			err   error
		)
		switch s {
		case XForwardedFor, Forwarded:
			// Skipping every trusted hop from the right is the walk the
			// digest (§3.5) asks for; an invalid entry yields "" and we fall
			// back to the peer.
			strat, err = realclientip.NewRightmostTrustedRangeStrategy(s.header(), nets)
		case XRealIP, CFConnectingIP:
			strat, err = realclientip.NewSingleIPHeaderStrategy(s.header())
		default:
			return nil, fmt.Errorf("clientip: unknown source %v", s)
		}
		if err != nil {
			return nil, fmt.Errorf("clientip: %v: %w", s, err)
		}
		r.sources = append(r.sources, source{header: s.header(), strat: strat})
	}
	if cfg.GroupIPv6 {
		r.v6bits = cfg.IPv6PrefixBits
		if r.v6bits == 0 {
			r.v6bits = DefaultIPv6PrefixBits
		}
		if r.v6bits < 1 || r.v6bits > 128 {
			return nil, fmt.Errorf("clientip: IPv6 prefix length %d outside 1..128", cfg.IPv6PrefixBits)
		}
	}
	return r, nil
}

// ParsePrefix reads a CIDR ("10.0.0.0/8") or a single address as a
// prefix, normalised the way client addresses are: IPv4-mapped IPv6 becomes
// IPv4 (so "::ffff:10.0.0.0/104" is "10.0.0.0/8"), and zones are refused.
func ParsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("zones are not allowed")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return NormalPrefix(p)
}

// NormalPrefix normalises p the way client addresses are: IPv4-mapped
// IPv6 becomes IPv4, and the address is masked. A mapped prefix shorter
// than /96 (wider than the mapped range) is an error.
func NormalPrefix(p netip.Prefix) (netip.Prefix, error) {
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, errors.New("IPv4-mapped prefix shorter than /96")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Peer returns req's socket peer, normalised as client addresses are, and
// whether it is a trusted proxy. The address is the zero Addr when
// RemoteAddr holds none; such a peer is trusted only as a socket peer
// (Config.TrustSocketPeers).
func (r *Resolver) Peer(req *http.Request) (netip.Addr, bool) {
	a, _, ok := parsePeer(req.RemoteAddr)
	if !ok {
		return netip.Addr{}, r.trustedSocket(req.RemoteAddr)
	}
	return a, r.isTrusted(a)
}

// trustedSocket reports whether remote, a RemoteAddr that holds no IP
// address, is a Unix socket's peer ("@" or "", never "host:port") that
// Config.TrustSocketPeers trusts.
func (r *Resolver) trustedSocket(remote string) bool {
	return r.socket && !strings.Contains(remote, ":")
}

// isTrusted is Trusted for an address already normalised.
func (r *Resolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns the client address of req (K2). The socket peer
// (req.RemoteAddr) is the client unless it is a trusted proxy; then the
// first configured Source present in the request decides. For
// X-Forwarded-For and Forwarded the list is walked from the right,
// skipping trusted proxies, and the first untrusted entry is the client.
// When that walk meets an invalid, "unknown" or obfuscated entry, when
// every entry is trusted, or when a single-address header is invalid, the
// peer is returned: we never skip over what we cannot read (digest §3.5).
//
// The result is normalised: IPv4-mapped IPv6 becomes IPv4, zones and ports
// are dropped. The only error is ErrNoPeer.
func (r *Resolver) ClientIP(req *http.Request) (netip.Addr, error) {
	a, _, err := r.clientIP(req)
	return a, err
}

// clientIP is ClientIP, also returning the text the address was read
// from, when it came from RemoteAddr: key can then return that text
// instead of formatting a copy.
func (r *Resolver) clientIP(req *http.Request) (netip.Addr, string, error) {
	peer, text, ok := parsePeer(req.RemoteAddr)
	if !ok {
		if r.trustedSocket(req.RemoteAddr) {
			if a, ok := r.forwarded(req); ok {
				return a, "", nil
			}
		}
		return netip.Addr{}, "", ErrNoPeer
	}
	if !r.isTrusted(peer) {
		return peer, text, nil
	}
	if a, ok := r.forwarded(req); ok {
		return a, "", nil
	}
	return peer, text, nil
}

// forwarded is the client address the first configured Source present in
// req gives, if it gives a valid one.
func (r *Resolver) forwarded(req *http.Request) (netip.Addr, bool) {
	for _, s := range r.sources {
		if len(req.Header[s.header]) > 0 { // the first source present decides
			return parseAddr(s.strat.ClientIP(req.Header, req.RemoteAddr))
		}
	}
	return netip.Addr{}, false
}

// Key returns the rate-limit key for req: the client address, or with
// GroupIPv6 the masked IPv6 prefix such as "2001:db8:1:2::/64". It returns
// "" when ClientIP fails; callers must not use "" as a shared bucket by
// accident.
func (r *Resolver) Key(req *http.Request) string {
	_, k, _ := r.ClientKey(req)
	return k
}

// ClientKey returns both the client address of req (see ClientIP) and its
// rate-limit key (see Key), resolving the address once. The only error is
// ErrNoPeer, with a zero address and an empty key.
func (r *Resolver) ClientKey(req *http.Request) (netip.Addr, string, error) {
	a, text, err := r.clientIP(req)
	if err != nil {
		return a, "", err
	}
	return a, r.key(a, text), nil
}

// key formats the key of a normalised address. When text, the form the
// address was read in, is already that key (as net/http writes RemoteAddr
// for an IPv4 peer), it is returned as it is, saving an allocation per
// request.
func (r *Resolver) key(a netip.Addr, text string) string {
	// A stack buffer keeps this to the single allocation of the result.
	var buf [64]byte
	if r.v6bits > 0 && a.Is6() {
		if p, err := a.Prefix(r.v6bits); err == nil {
			return string(p.AppendTo(buf[:0]))
		}
	}
	b := a.AppendTo(buf[:0])
	if string(b) == text {
		return text
	}
	return string(b)
}

func normalise(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

// parsePeer reads RemoteAddr, which net/http sets to "ip:port"; a bare or
// bracketed address is accepted too for hand-built requests. text is the
// address part of s, without port or brackets.
func parsePeer(s string) (a netip.Addr, text string, ok bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a := normalise(ap.Addr())
		text = s[:strings.LastIndexByte(s, ':')]
		if len(text) > 1 && text[0] == '[' {
			text = text[1 : len(text)-1]
		}
		return a, text, !a.IsUnspecified()
	}
	a, ok = parseAddr(s)
	return a, "", ok
}

// parseAddr parses an address as produced by realclientip (which may keep
// a zone, even on IPv4) or written by hand; the unspecified address is not
// a client.
func parseAddr(s string) (netip.Addr, bool) {
	if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s = s[:i]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	a = a.Unmap()
	if a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a, true
}
