package clientip

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"unicode"
)

func mustNew(t testing.TB, cfg Config) *Resolver {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func request(peer string, kv ...string) *http.Request {
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = peer
	for i := 0; i < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	return req
}

var allSources = []Source{XForwardedFor, Forwarded, XRealIP, CFConnectingIP}

func TestClientIP(t *testing.T) {
	trusted := []string{"10.0.0.0/8", "192.168.1.1", "2001:db8:ffff::/48"}
	xff := mustNew(t, Config{TrustedProxies: trusted})
	fwd := mustNew(t, Config{TrustedProxies: trusted, Sources: []Source{Forwarded}})
	both := mustNew(t, Config{TrustedProxies: trusted, Sources: []Source{XForwardedFor, Forwarded}})
	single := mustNew(t, Config{TrustedProxies: trusted, Sources: []Source{CFConnectingIP, XRealIP}})
	none := mustNew(t, Config{Sources: allSources})

	cases := []struct {
		name string
		r    *Resolver
		req  *http.Request
		want string
	}{
		// K2: an untrusted peer's headers never change the result.
		{"spoofed xff, untrusted peer", xff, request("203.0.113.7:1234", "X-Forwarded-For", "1.2.3.4"), "203.0.113.7"},
		{"spoofed everything, untrusted peer", mustNew(t, Config{TrustedProxies: trusted, Sources: allSources}),
			request("203.0.113.7:1234", "X-Forwarded-For", "1.2.3.4", "Forwarded", "for=1.2.3.4", "X-Real-IP", "1.2.3.4", "CF-Connecting-IP", "1.2.3.4"), "203.0.113.7"},
		{"no trusted proxies at all", none, request("10.0.0.1:1", "X-Forwarded-For", "1.2.3.4"), "10.0.0.1"},
		{"no header from trusted peer", xff, request("10.0.0.1:1"), "10.0.0.1"},

		// Trusted peer: the header is believed, walked right to left.
		{"trusted xff", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2"), "198.51.100.2"},
		{"spoof left of real client", xff, request("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 198.51.100.2"), "198.51.100.2"},
		{"multiple trusted hops", xff, request("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 198.51.100.2, 192.168.1.1, 10.9.9.9"), "198.51.100.2"},
		{"hops over several lines", xff, request("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 198.51.100.2", "X-Forwarded-For", "10.2.2.2"), "198.51.100.2"},
		{"all hops trusted: peer", xff, request("10.0.0.1:1", "X-Forwarded-For", "10.1.1.1, 192.168.1.1"), "10.0.0.1"},
		{"garbage entry stops the walk", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2, garbage, 10.1.1.1"), "10.0.0.1"},
		{"garbage rightmost", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2, 999.1.1.1"), "10.0.0.1"},
		{"empty entry stops the walk", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2,,10.1.1.1"), "10.0.0.1"},
		{"unspecified address", xff, request("10.0.0.1:1", "X-Forwarded-For", "0.0.0.0"), "10.0.0.1"},
		{"xff entry with port", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2:5555"), "198.51.100.2"},
		{"xff bracketed v6 with port", xff, request("10.0.0.1:1", "X-Forwarded-For", "[2001:db8::9]:80"), "2001:db8::9"},
		{"xff ipv4-mapped", xff, request("10.0.0.1:1", "X-Forwarded-For", "::ffff:198.51.100.2"), "198.51.100.2"},
		{"xff zone stripped", xff, request("10.0.0.1:1", "X-Forwarded-For", "fe80::1%eth0"), "fe80::1"},
		{"trusted v6 peer", xff, request("[2001:db8:ffff::1]:443", "X-Forwarded-For", "2001:db8:1::5"), "2001:db8:1::5"},
		{"ipv4-mapped trusted peer", xff, request("[::ffff:10.0.0.1]:443", "X-Forwarded-For", "198.51.100.2"), "198.51.100.2"},
		{"ipv4-mapped untrusted peer", xff, request("[::ffff:198.51.100.2]:443"), "198.51.100.2"},
		{"peer zone stripped", xff, request("[fe80::1%eth0]:443"), "fe80::1"},
		{"peer without port", xff, request("198.51.100.3"), "198.51.100.3"},

		// Forwarded (RFC 7239).
		{"forwarded quoted v6 with port", fwd, request("10.0.0.1:1", "Forwarded", `for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::17"},
		{"forwarded multiple params", fwd, request("10.0.0.1:1", "Forwarded", `for=192.0.2.60;proto=http;by=203.0.113.43`), "192.0.2.60"},
		{"forwarded case-insensitive name", fwd, request("10.0.0.1:1", "Forwarded", `For=192.0.2.60`), "192.0.2.60"},
		{"forwarded chain with trusted hop", fwd, request("10.0.0.1:1", "Forwarded", `for=1.1.1.1, for=192.0.2.60, for=10.3.3.3`), "192.0.2.60"},
		{"forwarded unknown", fwd, request("10.0.0.1:1", "Forwarded", `for=192.0.2.60, for=unknown`), "10.0.0.1"},
		{"forwarded obfuscated node", fwd, request("10.0.0.1:1", "Forwarded", `for=192.0.2.60, for=_hidden`), "10.0.0.1"},
		{"forwarded obfuscated port is dropped", fwd, request("10.0.0.1:1", "Forwarded", `for="192.0.2.60:_p1"`), "192.0.2.60"},
		{"forwarded without for", fwd, request("10.0.0.1:1", "Forwarded", `proto=https`), "10.0.0.1"},
		{"forwarded quoted ipv4-mapped", fwd, request("10.0.0.1:1", "Forwarded", `for="[::ffff:192.0.2.60]"`), "192.0.2.60"},

		// Source order: the first header present decides, even if it fails.
		{"xff preferred over forwarded", both, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2", "Forwarded", "for=192.0.2.60"), "198.51.100.2"},
		{"forwarded used when xff absent", both, request("10.0.0.1:1", "Forwarded", "for=192.0.2.60"), "192.0.2.60"},
		{"broken xff does not fall through", both, request("10.0.0.1:1", "X-Forwarded-For", "junk", "Forwarded", "for=192.0.2.60"), "10.0.0.1"},
		{"xff ignored when not configured", single, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2"), "10.0.0.1"},

		// Single-address headers.
		{"cf-connecting-ip", single, request("10.0.0.1:1", "CF-Connecting-IP", "198.51.100.4", "X-Real-IP", "198.51.100.5"), "198.51.100.4"},
		{"x-real-ip", single, request("10.0.0.1:1", "X-Real-IP", "2001:db8::5"), "2001:db8::5"},
		{"x-real-ip garbage", single, request("10.0.0.1:1", "X-Real-IP", "nope"), "10.0.0.1"},
		{"x-real-ip list is not a single address", single, request("10.0.0.1:1", "X-Real-IP", "1.1.1.1, 2.2.2.2"), "10.0.0.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.r.ClientIP(c.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != c.want {
				t.Errorf("ClientIP = %s, want %s", got, c.want)
			}
			if got.Is4In6() || got.Zone() != "" {
				t.Errorf("not normalised: %v", got)
			}
		})
	}
}

func TestNoPeer(t *testing.T) {
	r := mustNew(t, Config{})
	for _, peer := range []string{"", "@", "/tmp/sock", "example.com:80", "[::]:80", "0.0.0.0:1"} {
		if _, err := r.ClientIP(request(peer)); !errors.Is(err, ErrNoPeer) {
			t.Errorf("peer %q: err = %v, want ErrNoPeer", peer, err)
		}
		if k := r.Key(request(peer)); k != "" {
			t.Errorf("peer %q: key %q", peer, k)
		}
	}
}

// TestSocketPeers: with TrustSocketPeers, a Unix-socket peer is a trusted
// proxy, so its X-Forwarded-For names the client; without it, or without
// a usable header, or for a TCP address that does not parse, no address.
func TestSocketPeers(t *testing.T) {
	r := mustNew(t, Config{TrustSocketPeers: true, TrustedProxies: []string{"10.0.0.0/8"}})
	for _, tc := range []struct{ peer, xff, want string }{
		{"@", "198.51.100.7", "198.51.100.7"},
		{"", "198.51.100.7, 10.0.0.2", "198.51.100.7"},
		{"@", "", ""},
		{"@", "garbage", ""},
		{"example.com:80", "198.51.100.7", ""},
	} {
		req := request(tc.peer)
		if tc.xff != "" {
			req.Header.Set("X-Forwarded-For", tc.xff)
		}
		if k := r.Key(req); k != tc.want {
			t.Errorf("peer %q, X-Forwarded-For %q: key %q, want %q", tc.peer, tc.xff, k, tc.want)
		}
	}
	if _, trusted := r.Peer(request("@")); !trusted {
		t.Error("Peer: a socket peer is not trusted with TrustSocketPeers")
	}
	if _, trusted := r.Peer(request("example.com:80")); trusted {
		t.Error("Peer: an unreadable TCP peer is trusted")
	}
	untrusting := mustNew(t, Config{})
	if _, trusted := untrusting.Peer(request("@")); trusted {
		t.Error("Peer: a socket peer is trusted without TrustSocketPeers")
	}
	req := request("@")
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	if k := untrusting.Key(req); k != "" {
		t.Errorf("socket peer not trusted: key %q, want none", k)
	}
}

func TestKey(t *testing.T) {
	plain := mustNew(t, Config{})
	g64 := mustNew(t, Config{GroupIPv6: true})
	g48 := mustNew(t, Config{GroupIPv6: true, IPv6PrefixBits: 48})
	cases := []struct {
		r          *Resolver
		peer, want string
	}{
		{plain, "[2001:db8:1:2:aaaa::1]:1", "2001:db8:1:2:aaaa::1"},
		{g64, "[2001:db8:1:2:aaaa::1]:1", "2001:db8:1:2::/64"},
		{g64, "[2001:db8:1:2:bbbb:cccc:dddd:eeee]:1", "2001:db8:1:2::/64"},
		{g64, "[fe80::1%eth0]:1", "fe80::/64"},
		{g48, "[2001:db8:1:2::1]:1", "2001:db8:1::/48"},
		{g64, "198.51.100.2:1", "198.51.100.2"},
		{g64, "[::ffff:198.51.100.2]:1", "198.51.100.2"},
		{plain, "[2001:DB8:0::1]:1", "2001:db8::1"},
		{plain, "[fe80::1%eth0]:1", "fe80::1"},
		{plain, "198.51.100.2", "198.51.100.2"},
		{plain, "[2001:db8::1]", "2001:db8::1"},
	}
	for _, c := range cases {
		if got := c.r.Key(request(c.peer)); got != c.want {
			t.Errorf("Key(%s) = %q, want %q", c.peer, got, c.want)
		}
		a, k, err := c.r.ClientKey(request(c.peer))
		if want, _ := c.r.ClientIP(request(c.peer)); err != nil || a != want || k != c.want {
			t.Errorf("ClientKey(%s) = %v, %q, %v; want %v, %q", c.peer, a, k, err, want, c.want)
		}
	}
}

// TestClientKeyAllocs: an IPv4 peer's key is RemoteAddr's own text, so
// resolving it allocates nothing; a trusted proxy's client is formatted.
func TestClientKeyAllocs(t *testing.T) {
	r := mustNew(t, Config{GroupIPv6: true, TrustedProxies: []string{"10.0.0.0/8"}})
	req := request("198.51.100.2:40000")
	if n := testing.AllocsPerRun(100, func() { r.ClientKey(req) }); n != 0 {
		t.Errorf("IPv4 peer: %v allocations, want 0", n)
	}
	proxied := request("10.0.0.1:40000", "X-Forwarded-For", "203.0.113.9")
	if _, k, _ := r.ClientKey(proxied); k != "203.0.113.9" {
		t.Errorf("client behind a trusted proxy: key %q", k)
	}
}

func TestNewErrors(t *testing.T) {
	bad := []Config{
		{TrustedProxies: []string{"10.0.0.0/33"}},
		{TrustedProxies: []string{"not-an-ip"}},
		{TrustedProxies: []string{"10.0.0.1/8/8"}},
		{TrustedProxies: []string{"fe80::1%eth0"}},
		{TrustedProxies: []string{"::ffff:10.0.0.0/64"}},
		{Sources: []Source{XForwardedFor, XForwardedFor}},
		{Sources: []Source{Source(99)}},
		{GroupIPv6: true, IPv6PrefixBits: 129},
		{GroupIPv6: true, IPv6PrefixBits: -1},
	}
	for _, cfg := range bad {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	r := mustNew(t, Config{TrustedProxies: []string{" 10.1.2.3/8 ", "::ffff:192.168.0.0/112", "2001:db8::1"}})
	for a, want := range map[string]bool{"10.200.0.1": true, "192.168.7.7": true, "::ffff:192.168.7.7": true, "192.169.0.1": false, "2001:db8::1": true, "2001:db8::2": false} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(a), 1).String()
		if _, got := r.Peer(req); got != want {
			t.Errorf("Peer from %s: trusted = %v", a, got)
		}
	}
	if XRealIP.String() != "X-Real-Ip" || Source(42).String() != "Source(42)" {
		t.Error("Source.String")
	}
}

// FuzzClientIP: header input never panics, and the result is always either
// the peer or an address that appears in one of the believed headers.
func FuzzClientIP(f *testing.F) {
	f.Add("198.51.100.2, 10.0.0.2", `for="[2001:db8::1]:80"`, "1.2.3.4", "::ffff:1.2.3.4", true)
	f.Add("garbage", "for=unknown", "", "", false)
	f.Add("fe80::1%eth0, 10.0.0.0", "for=_x;by=1.1.1.1", "[::1]", "0.0.0.0", true)
	r := mustNew(f, Config{TrustedProxies: []string{"10.0.0.0/8", "::1"}, Sources: allSources, GroupIPv6: true})
	f.Fuzz(func(t *testing.T, xff, fwd, real, cf string, trustedPeer bool) {
		peer, peerStr := netip.MustParseAddr("198.51.100.77"), "198.51.100.77:1"
		if trustedPeer {
			peer, peerStr = netip.MustParseAddr("10.0.0.1"), "10.0.0.1:1"
		}
		req := &http.Request{RemoteAddr: peerStr, Header: http.Header{}}
		for k, v := range map[string]string{"X-Forwarded-For": xff, "Forwarded": fwd, "X-Real-Ip": real, "Cf-Connecting-Ip": cf} {
			if v != "" {
				req.Header[k] = []string{v}
			}
		}
		got, err := r.ClientIP(req)
		if err != nil {
			t.Fatal(err)
		}
		if got.Is4In6() || got.Zone() != "" || !got.IsValid() {
			t.Fatalf("not normalised: %v", got)
		}
		if !trustedPeer && got != peer {
			t.Fatalf("untrusted peer's headers changed the result to %v", got)
		}
		if got != peer && !inHeaders(got, xff, fwd, real, cf) {
			t.Fatalf("%v is neither the peer nor in the headers", got)
		}
		a, k, err := r.ClientKey(req)
		if err != nil || a != got || k == "" || k != r.key(got, "") {
			t.Fatalf("ClientKey = %v, %q, %v; ClientIP gave %v, key %q", a, k, err, got, r.key(got, ""))
		}
	})
}

// inHeaders looks for a in any address-like substring of the values.
func inHeaders(a netip.Addr, values ...string) bool {
	for _, v := range values {
		for _, piece := range strings.FieldsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`,;="[]`, r) }) {
			if i := strings.IndexByte(piece, '%'); i >= 0 {
				piece = piece[:i]
			}
			// The piece itself, or the piece minus a trailing ":port".
			cands := []string{piece}
			if i := strings.LastIndexByte(piece, ':'); i > 0 {
				cands = append(cands, piece[:i])
			}
			for _, cand := range cands {
				if b, err := netip.ParseAddr(cand); err == nil && b.Unmap() == a {
					return true
				}
			}
			if ap, err := netip.ParseAddrPort(piece); err == nil && ap.Addr().Unmap() == a {
				return true
			}
		}
	}
	return false
}

func BenchmarkClientIPUntrustedPeer(b *testing.B) {
	r := mustNew(b, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	req := request("198.51.100.2:5555", "X-Forwarded-For", "1.2.3.4")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ClientIP(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClientIPTrustedXFF(b *testing.B) {
	r := mustNew(b, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	req := request("10.0.0.1:5555", "X-Forwarded-For", "1.2.3.4, 198.51.100.2, 10.0.0.9")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ClientIP(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyIPv6Grouped(b *testing.B) {
	r := mustNew(b, Config{GroupIPv6: true})
	req := request("[2001:db8:1:2:aaaa::1]:5555")
	b.ReportAllocs()
	for b.Loop() {
		if r.Key(req) == "" {
			b.Fatal("empty")
		}
	}
}

func TestParsePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8":          "10.0.0.0/8",
		"10.1.2.3/8":          "10.0.0.0/8",
		"::ffff:10.0.0.0/104": "10.0.0.0/8", // matches IPv4 clients, as they are keyed
		"::ffff:192.0.2.7":    "192.0.2.7/32",
		"2001:db8::1":         "2001:db8::1/128",
		"2001:db8::/32":       "2001:db8::/32",
	} {
		p, err := ParsePrefix(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "fe80::1%eth0", "::ffff:10.0.0.0/90", "nope"} {
		if _, err := ParsePrefix(bad); err == nil {
			t.Errorf("ParsePrefix(%q) succeeded", bad)
		}
	}
}
