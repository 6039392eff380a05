package pattern

import (
	"fmt"
	"go/token"
	"net/url"
	gopath "path"
	"slices"
	"strings"
	"unicode"
)

// Pattern is a parsed route pattern. The package doc gives its syntax and
// how matching differs from ServeMux's.
type Pattern struct {
	raw    string
	method string
	host   string
	segs   []segment
	dir    bool // trailing "/" or {name...}: a "/" and anything may follow the segments
	end    bool // {$}: a "/" and nothing may follow
}

type segment struct {
	lit  string
	wild bool // {name}: any one non-empty segment
}

// String returns the pattern as written.
func (p *Pattern) String() string { return p.raw }

// Covers reports whether p matches every request that q matches, so that a
// rule with pattern q placed after one with pattern p can never be reached.
// It errs towards false: it may miss a pair that covers, never the other
// way.
func (p *Pattern) Covers(q *Pattern) bool {
	switch {
	case p.method == "" || strings.EqualFold(p.method, q.method):
	case p.method == "GET" && strings.EqualFold(q.method, "HEAD"):
	default:
		return false
	}
	if p.host != "" && !strings.EqualFold(p.host, q.host) {
		return false
	}
	if p.dir && len(p.segs) == 0 {
		return true
	}
	if len(q.segs) < len(p.segs) {
		return false
	}
	for i, s := range p.segs {
		if !s.wild && (q.segs[i].wild || !strings.EqualFold(s.lit, q.segs[i].lit)) {
			return false
		}
	}
	same := len(q.segs) == len(p.segs)
	switch {
	case p.dir: // p: the segments, "/", anything
		return !same || q.dir || q.end
	case p.end: // p: the segments and "/"
		return same && q.end
	default: // p: the segments, with or without a "/"
		return same && !q.dir
	}
}

// Parse reads a pattern "[METHOD ][HOST]/[PATH]". Its errors quote the
// pattern and say what is wrong with it.
func Parse(s string) (*Pattern, error) {
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) {
		return nil, fmt.Errorf("pattern %q: a control character; a pattern is printable text", s)
	}
	p := &Pattern{raw: s}
	rest := s
	if i := strings.IndexAny(rest, " \t"); i >= 0 {
		p.method, rest = rest[:i], strings.TrimLeft(rest[i:], " \t")
		for _, c := range p.method {
			if !('A' <= c && c <= 'Z') {
				return nil, fmt.Errorf("pattern %q: bad method %q", s, p.method)
			}
		}
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return nil, fmt.Errorf("pattern %q: path must start with /", s)
	}
	p.host, rest = rest[:i], rest[i+1:]
	if strings.ContainsAny(p.host, " \t") {
		return nil, fmt.Errorf("pattern %q: bad host %q (want \"[METHOD ][HOST]/[PATH]\" with one method)", s, p.host)
	}
	if strings.ContainsAny(rest, " \t") {
		return nil, fmt.Errorf("pattern %q: a path cannot hold a space; write it as %%20", s)
	}
	if strings.ContainsAny(rest, "?#") {
		return nil, fmt.Errorf("pattern %q: a pattern matches the path only, never a query or fragment; write a literal ? or # as %%3F or %%23", s)
	}
	if rest == "" {
		p.dir = true // "/" matches every path
		return p, nil
	}
	if err := p.parsePath(rest); err != nil {
		return nil, err
	}
	return p, nil
}

// parsePath reads the segments after the path's first "/".
func (p *Pattern) parsePath(rest string) error {
	s := p.raw
	parts := strings.Split(rest, "/")
	names := map[string]bool{}
	wildcard := func(part, name string) error {
		if !token.IsIdentifier(name) {
			return fmt.Errorf("pattern %q: wildcard %s needs a Go identifier for its name", s, part)
		}
		if names[name] {
			return fmt.Errorf("pattern %q: wildcard name %q used twice", s, name)
		}
		names[name] = true
		return nil
	}
	for j, part := range parts {
		last := j == len(parts)-1
		switch {
		case last && part == "":
			p.dir = true
		case part == "{$}":
			if !last {
				return fmt.Errorf("pattern %q: {$} must end the path", s)
			}
			p.end = true
		case strings.HasPrefix(part, "{") && strings.HasSuffix(part, "...}"):
			if !last {
				return fmt.Errorf("pattern %q: %s must end the path", s, part)
			}
			if err := wildcard(part, part[1:len(part)-4]); err != nil {
				return err
			}
			p.dir = true
		case strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}"):
			if err := wildcard(part, part[1:len(part)-1]); err != nil {
				return err
			}
			p.segs = append(p.segs, segment{wild: true})
		case strings.ContainsAny(part, "{}"):
			return fmt.Errorf("pattern %q: a wildcard must be a whole segment, not %q", s, part)
		default:
			lit, err := literal(s, part)
			if err != nil {
				return err
			}
			p.segs = append(p.segs, segment{lit: lit})
		}
	}
	return nil
}

// literal decodes a literal segment: requests are matched on their decoded
// path, so a literal is decoded too, as ServeMux does: "/my%20file" is
// "/my file".
func literal(s, part string) (string, error) {
	lit, err := url.PathUnescape(part)
	switch {
	case err != nil:
		return "", fmt.Errorf("pattern %q: bad escape in %q", s, part)
	case strings.Contains(lit, "/"):
		return "", fmt.Errorf("pattern %q: %q holds an escaped /, which a request's decoded path cannot keep apart from a real one", s, part)
	case lit == "" || lit == "." || lit == "..":
		return "", fmt.Errorf("pattern %q: empty or dot segment", s)
	}
	return lit, nil
}

// Match reports whether a request with this method, host (a port is
// ignored) and decoded path matches. The path is cleaned first ("//login",
// "/a/../login" and "/login/." all count as "/login"), literal segments and
// methods compare without regard to case, and ";parameters" are dropped
// from segments, so a client cannot slip past a rule by spelling a path
// the way some other server would still route to it ("/LOGIN",
// "/login;x", "post"). For a rule this errs towards limiting more; for a
// skip, towards skipping more.
func (p *Pattern) Match(method, host, path string) bool {
	if p.method != "" && !strings.EqualFold(p.method, method) && !(p.method == "GET" && strings.EqualFold(method, "HEAD")) {
		return false
	}
	if p.host != "" && !strings.EqualFold(p.host, HostOnly(host)) {
		return false
	}
	if p.dir && len(p.segs) == 0 {
		return true // "/" (or "HOST/"): every path
	}
	rest := cleanPath(path)[1:]
	slash := true // a "/" follows what was consumed so far
	for _, seg := range p.segs {
		if !slash || rest == "" {
			return false
		}
		part := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			part, rest = rest[:i], rest[i+1:]
		} else {
			rest, slash = "", false
		}
		if i := strings.IndexByte(part, ';'); i >= 0 {
			part = part[:i] // "/login;jsessionid=x" is "/login" to many servers
		}
		if !seg.wild && !strings.EqualFold(seg.lit, part) {
			return false
		}
	}
	switch {
	case p.dir:
		return slash
	case p.end:
		return slash && rest == ""
	default:
		// An exact pattern also takes the path with a trailing slash: many
		// frameworks route "/login/" to "/login", and a limit must not be
		// dodged by adding one.
		return rest == ""
	}
}

// cleanPath normalises a request path the ways app servers may read it,
// so that a limit is not dodged by a spelling they route alike: "\" as
// "/" (IIS); every segment cut at ";parameters" (Tomcat, Jetty and Spring
// route "/x/..;/login" to "/login") and at a control character (a C
// string ends at "%00"), and stripped of trailing spaces and tabs (Spring
// trims "/login%20"), before "." and ".." are resolved as path.Clean does.
func cleanPath(p string) string {
	if strings.ContainsFunc(p, oddInPath) {
		segs := strings.Split(strings.ReplaceAll(p, "\\", "/"), "/")
		for i, seg := range segs {
			if j := strings.IndexFunc(seg, cutsSegment); j >= 0 {
				seg = seg[:j]
			}
			segs[i] = strings.TrimRight(seg, " \t")
		}
		p = strings.Join(segs, "/")
	}
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	c := gopath.Clean(p)
	if c != "/" && strings.HasSuffix(p, "/") {
		c += "/" // keep the trailing slash that "/a/" patterns look for
	}
	return c
}

// oddInPath reports a character that cleanPath reads as some app server
// would rather than literally.
func oddInPath(r rune) bool { return r == '\\' || r == ' ' || cutsSegment(r) }

// cutsSegment reports a character at which a segment ends for some app
// server: ";" starts path parameters; a control character ends a C string.
func cutsSegment(r rune) bool { return r == ';' || unicode.IsControl(r) }

// HostOnly returns a Host value without its port: "example.com:8080" is
// "example.com", "[::1]:443" is "[::1]".
func HostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		return h[:i]
	}
	return h
}

// Shadow is a rule no request reaches: a skip or an earlier rule matches
// every request it does.
type Shadow struct {
	Rule int  // the rule's index
	By   int  // the index of the skip (BySkip) or earlier rule that takes its requests
	Skip bool // By is a skip
	Same bool // the two patterns match the same requests
}

// Advice says how to fix the order.
func (s Shadow) Advice() string {
	switch {
	case s.Skip:
		return "skips are checked before every rule"
	case s.Same:
		return "the two match the same requests: remove or merge one"
	}
	return "put the narrower rule first"
}

// Shadows finds every rule that no request reaches when skips are checked
// before every rule, then the rules in order, the first match winning.
// Nil entries (patterns that did not parse) are passed over. Like Covers
// it may miss a shadow, and never reports a reachable rule.
func Shadows(skips, rules []*Pattern) []Shadow {
	var out []Shadow
	for i, r := range rules {
		if r == nil {
			continue
		}
		if j := slices.IndexFunc(skips, func(s *Pattern) bool { return s != nil && s.Covers(r) }); j >= 0 {
			out = append(out, Shadow{Rule: i, By: j, Skip: true})
			continue
		}
		if j := slices.IndexFunc(rules[:i], func(e *Pattern) bool { return e != nil && e.Covers(r) }); j >= 0 {
			out = append(out, Shadow{Rule: i, By: j, Same: r.Covers(rules[j])})
		}
	}
	return out
}
