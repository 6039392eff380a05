package server

import "slices"

// parseSimple decodes the common shape of a check without reflection:
// one flat JSON object whose strings hold printable ASCII without escapes,
// with the fields of CheckRequest only. Anything else — escapes, non-ASCII,
// unknown fields, nesting, bad syntax — returns false, and the caller
// falls back to the strict decoder, which gives the same result or says
// precisely what is wrong. The fast path was a large share of a check's
// cost.
func parseSimple(b []byte, req *CheckRequest) bool {
	p := simpleParser{b: b}
	if !p.consume('{') {
		return false
	}
	if p.consume('}') {
		return p.end()
	}
	var seen [len(simpleFields)]bool // a repeat goes to the strict decoder, which refuses it
	for {
		field, ok := p.str()
		if !ok || !p.consume(':') {
			return false
		}
		i := slices.Index(simpleFields[:], field)
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		switch field {
		case "key":
			if req.Key, ok = p.str(); !ok {
				return false
			}
		case "rule":
			if req.Rule, ok = p.str(); !ok {
				return false
			}
		case "cost":
			n, ok := p.int()
			if !ok {
				return false
			}
			req.Cost = &n
		case "policies":
			if req.Policies, ok = p.strs(req.Policies[:0]); !ok {
				return false
			}
		}
		if p.consume('}') {
			return p.end()
		}
		if !p.consume(',') {
			return false
		}
	}
}

// strs reads an array of strings, appending them to into.
func (p *simpleParser) strs(into []string) ([]string, bool) {
	if !p.consume('[') {
		return into, false
	}
	if p.consume(']') {
		return into, true
	}
	for {
		s, ok := p.str()
		if !ok {
			return into, false
		}
		into = append(into, s)
		if p.consume(']') {
			return into, true
		}
		if !p.consume(',') {
			return into, false
		}
	}
}

// simpleFields are the fields parseSimple reads, in the order of its seen
// flags.
var simpleFields = [...]string{"key", "rule", "cost", "policies"}

type simpleParser struct {
	b []byte
	i int
}

func (p *simpleParser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *simpleParser) consume(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *simpleParser) end() bool {
	p.space()
	return p.i == len(p.b)
}

func (p *simpleParser) str() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
		p.i++
	}
	return "", false
}

// int reads a JSON integer of at most 15 digits, so it cannot overflow.
func (p *simpleParser) int() (int64, bool) {
	p.space()
	neg := false
	if p.i < len(p.b) && p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 15 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
