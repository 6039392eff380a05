package header

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dunglas/httpsfv"
)

// Field names (canonical MIME form, as used as http.Header keys).
const (
	FieldPolicy     = "Ratelimit-Policy" // draft-11 RateLimit-Policy (H4)
	FieldRateLimit  = "Ratelimit"        // draft-11 RateLimit (H4)
	FieldRetryAfter = "Retry-After"      // RFC 9110 §10.2.3 (H2)
)

// Quota units defined by draft-11 §3.1.2 (digest §1.1).
const (
	UnitRequests           = "requests" // the default when qu is absent
	UnitContentBytes       = "content-bytes"
	UnitConcurrentRequests = "concurrent-requests"
)

// MaxInteger is the largest magnitude of an RFC 9651 Integer (15 digits).
const MaxInteger = 999_999_999_999_999

// Policy is one quota policy item of RateLimit-Policy (digest §1.1).
type Policy struct {
	// Name is the policy name, carried as an sf-string. Format requires a
	// non-empty name of printable ASCII (0x20–0x7E), unique within the field.
	Name string
	// Quota is q: the quota per partition, in Unit, 0 ≤ Quota ≤ MaxInteger.
	Quota int64
	// Unit is qu. When formatting, "" and "requests" both mean the default
	// and qu is not emitted. Parsing always sets the effective unit, so an
	// absent qu reads back as "requests". Unregistered units parse (pol-13);
	// see EffectiveUnit. An explicit qu="" is rejected as naming no unit.
	Unit string
	// Window is w in whole seconds; 0 means absent (w must be ≥ 1).
	Window int64
	// PartitionKey is pk (a Byte Sequence); nil means absent, an empty
	// non-nil slice is sent as "pk=::".
	PartitionKey []byte
	// Other holds parameters draft-11 does not define (comments such as
	// "acme-burst"), keyed by SF key. Value types: int64 (Integer), float64
	// (Decimal), string (String), httpsfv.Token, []byte (Byte Sequence),
	// bool (Boolean), time.Time (Date, UTC) and httpsfv.DisplayString.
	// Formatting emits them after the defined parameters, sorted by key.
	Other map[string]any
	// Lenient is set by the lenient parsers when this item was accepted only
	// because of a lenient rule (Token name or Token qu, vectors pol-25,
	// pol-27). It is never set by the strict parser and ignored by Format.
	Lenient bool
}

// EffectiveUnit returns the quota unit in force and whether it is one of
// the units registered by draft-11 §3.1.2. "" and the singular "request"
// (the draft's IANA table spelling, digest §1.1 and vector pol-14) map to
// "requests". Clients should not pace request counts on an unknown unit
// (vector pol-13).
func (p Policy) EffectiveUnit() (unit string, known bool) {
	switch p.Unit {
	case "", UnitRequests, "request":
		return UnitRequests, true
	case UnitContentBytes, UnitConcurrentRequests:
		return p.Unit, true
	}
	return p.Unit, false
}

// Limit is one service limit item of RateLimit (digest §1.2).
type Limit struct {
	// Name is the policy this item reports on (an sf-string, same rules as
	// Policy.Name).
	Name string
	// Remaining is r, the available quota in the policy's unit, ≥ 0. It is
	// a hint, never a grant (C2).
	Remaining int64
	// Window is t, the effective window in whole seconds (≥ 0), valid only
	// when HasWindow is set. In draft-11 t is not a reset time: it is the
	// span in which no more than Remaining may be used (digest §1.11).
	Window    int64
	HasWindow bool
	// PartitionKey is pk; nil means absent.
	PartitionKey []byte
	// Other holds parameters draft-11 does not define; see Policy.Other.
	Other map[string]any
	// Lenient is set by ParseLimitLenient when the item had a Token name
	// (vector lim-25).
	Lenient bool
}

// FormatPolicy serialises policies as a RateLimit-Policy field value
// (digest §1.9, product rules §4): names as sf-strings, q always, qu only
// when not "requests", w when non-zero, pk when non-nil, then Other.
//
// It returns an error wrapping ErrInvalid for an empty name, a name with
// bytes outside 0x20–0x7E, duplicate names, a negative or too large value,
// the unit "request" (never emitted, digest §4) or a bad Other parameter,
// and ErrEmpty for no policies (omit the field instead: it must be
// non-empty).
func FormatPolicy(policies []Policy) (string, error) {
	var buf [256]byte
	b, err := AppendPolicy(buf[:0], policies)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendPolicy is FormatPolicy appending to dst. On error dst is returned
// unchanged.
func AppendPolicy(dst []byte, policies []Policy) ([]byte, error) {
	if len(policies) == 0 {
		return dst, ErrEmpty
	}
	orig := len(dst)
	for i := range policies {
		p := &policies[i]
		if err := checkName(p.Name, i, func(j int) string { return policies[j].Name }); err != nil {
			return dst[:orig], err
		}
		if p.Quota < 0 || p.Quota > MaxInteger {
			return dst[:orig], invalidf("policy %q: q=%d out of range 0..%d", p.Name, p.Quota, MaxInteger)
		}
		if p.Window < 0 || p.Window > MaxInteger {
			return dst[:orig], invalidf("policy %q: w=%d out of range 1..%d", p.Name, p.Window, MaxInteger)
		}
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendString(dst, p.Name)
		dst = append(dst, ";q="...)
		dst = strconv.AppendInt(dst, p.Quota, 10)
		switch p.Unit {
		case "", UnitRequests:
		case "request":
			return dst[:orig], invalidf("policy %q: unit %q is never emitted; use %q", p.Name, p.Unit, UnitRequests)
		default:
			if !printable(p.Unit) {
				return dst[:orig], invalidf("policy %q: unit %q is not printable ASCII", p.Name, p.Unit)
			}
			dst = append(dst, ";qu="...)
			dst = appendString(dst, p.Unit)
		}
		if p.Window > 0 {
			dst = append(dst, ";w="...)
			dst = strconv.AppendInt(dst, p.Window, 10)
		}
		if p.PartitionKey != nil {
			dst = appendPK(dst, p.PartitionKey)
		}
		var err error
		if dst, err = appendOther(dst, p.Other, "q", "qu", "w"); err != nil {
			return dst[:orig], fmt.Errorf("policy %q: %w", p.Name, err)
		}
	}
	return dst, nil
}

// FormatLimit serialises service limits as a RateLimit field value (digest
// §1.9): names as sf-strings, r always, t when HasWindow, pk when non-nil,
// then Other. Errors are as for FormatPolicy; an empty slice gives ErrEmpty
// (omit the field).
func FormatLimit(limits []Limit) (string, error) {
	var buf [128]byte
	b, err := AppendLimit(buf[:0], limits)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendLimit is FormatLimit appending to dst. On error dst is returned
// unchanged.
func AppendLimit(dst []byte, limits []Limit) ([]byte, error) {
	if len(limits) == 0 {
		return dst, ErrEmpty
	}
	orig := len(dst)
	for i := range limits {
		l := &limits[i]
		if err := checkName(l.Name, i, func(j int) string { return limits[j].Name }); err != nil {
			return dst[:orig], err
		}
		if l.Remaining < 0 || l.Remaining > MaxInteger {
			return dst[:orig], invalidf("limit %q: r=%d out of range 0..%d", l.Name, l.Remaining, MaxInteger)
		}
		if l.HasWindow && (l.Window < 0 || l.Window > MaxInteger) {
			return dst[:orig], invalidf("limit %q: t=%d out of range 0..%d", l.Name, l.Window, MaxInteger)
		}
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendString(dst, l.Name)
		dst = append(dst, ";r="...)
		dst = strconv.AppendInt(dst, l.Remaining, 10)
		if l.HasWindow {
			dst = append(dst, ";t="...)
			dst = strconv.AppendInt(dst, l.Window, 10)
		}
		if l.PartitionKey != nil {
			dst = appendPK(dst, l.PartitionKey)
		}
		var err error
		if dst, err = appendOther(dst, l.Other, "r", "t"); err != nil {
			return dst[:orig], fmt.Errorf("limit %q: %w", l.Name, err)
		}
	}
	return dst, nil
}

// checkName validates names[i] and rejects a duplicate of an earlier one.
// The quadratic scan is cheaper than a map for the handful of policies a
// response carries.
func checkName(name string, i int, nameAt func(int) string) error {
	if name == "" {
		return invalidf("item %d: empty name", i)
	}
	if !printable(name) {
		return invalidf("item %d: name %q has bytes outside printable ASCII", i, name)
	}
	for j := 0; j < i; j++ {
		if nameAt(j) == name {
			return invalidf("duplicate name %q", name)
		}
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// appendString writes an sf-string; s must be printable ASCII.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}

func appendPK(dst, pk []byte) []byte {
	dst = append(dst, ";pk=:"...)
	dst = base64.StdEncoding.AppendEncode(dst, pk)
	return append(dst, ':')
}

// appendOther writes extension parameters sorted by key. reserved are the
// keys draft-11 defines for the field (plus "pk"), which must not be
// smuggled in through Other.
func appendOther(dst []byte, other map[string]any, reserved ...string) ([]byte, error) {
	if len(other) == 0 {
		return dst, nil
	}
	keys := make([]string, 0, len(other))
	for k := range other {
		if k == "pk" || slices.Contains(reserved, k) {
			return dst, invalidf("parameter %q must be set through its field, not Other", k)
		}
		if !validKey(k) {
			return dst, invalidf("parameter key %q is not a valid SF key", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = append(dst, ';')
		dst = append(dst, k...)
		v := other[k]
		if b, ok := v.(bool); ok && b {
			continue // Boolean true is written as the bare key (RFC 9651 §4.1.1.2)
		}
		s, err := marshalBare(v)
		if err != nil {
			return dst, invalidf("parameter %q: %v", k, err)
		}
		dst = append(dst, '=')
		dst = append(dst, s...)
	}
	return dst, nil
}

// marshalBare serialises one bare item through httpsfv after checking its
// type, because httpsfv panics on unsupported types.
func marshalBare(v any) (string, error) {
	switch x := v.(type) {
	case int:
		v = int64(x)
	case int64, float64, string, httpsfv.Token, []byte, bool, time.Time, httpsfv.DisplayString:
	default:
		return "", fmt.Errorf("unsupported type %T", v)
	}
	return httpsfv.Marshal(httpsfv.Item{Value: v, Params: httpsfv.NewParams()})
}

func validKey(k string) bool {
	if k == "" || !(k[0] >= 'a' && k[0] <= 'z' || k[0] == '*') {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			return false
		}
	}
	return true
}

// ParsePolicy parses RateLimit-Policy field lines strictly per draft-11
// (digest §1.1, §1.9). Several lines are joined with ", " first. Any
// violation invalidates the whole field (digest §1.0, §1.12 point 4): the
// result is nil and the error wraps ErrEmpty, ErrSyntax or ErrInvalid.
//
// Duplicate parameter keys keep the last value (pol-11). Duplicate policy
// names are kept, in order (pol-12; draft-11 is silent, see §1.12 point 1).
// Base64 in pk may omit padding (pol-16).
func ParsePolicy(lines ...string) ([]Policy, error) {
	return parsePolicy(lines, false)
}

// ParsePolicyLenient is ParsePolicy that also accepts a Token where draft-11
// requires a String — for the policy name (pol-27) and for qu (pol-25) —
// and flags such items with Policy.Lenient. Use it only in clients; servers
// never emit those forms (digest §4).
func ParsePolicyLenient(lines ...string) ([]Policy, error) {
	return parsePolicy(lines, true)
}

func parsePolicy(lines []string, lenient bool) ([]Policy, error) {
	list, err := parseList(lines)
	if err != nil {
		return nil, err
	}
	out := make([]Policy, 0, len(list))
	for i, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok {
			return nil, invalidf("member %d: policy must be an Item, got Inner List", i)
		}
		var p Policy
		p.Name, p.Lenient, err = itemName(item.Value, i, lenient)
		if err != nil {
			return nil, err
		}
		p.Unit = UnitRequests
		haveQ := false
		for _, k := range item.Params.Names() {
			v, _ := item.Params.Get(k)
			switch k {
			case "q":
				if p.Quota, err = nonNegInt(v, "q", p.Name); err != nil {
					return nil, err
				}
				haveQ = true
			case "qu":
				switch u := v.(type) {
				case string:
					// Unregistered units are kept (pol-13), but an empty one
					// names no unit at all and could not be written back.
					if u == "" {
						return nil, invalidf("policy %q: qu must not be empty", p.Name)
					}
					p.Unit = u
				case httpsfv.Token:
					if !lenient {
						return nil, invalidf("policy %q: qu must be String, got Token", p.Name)
					}
					p.Unit, p.Lenient = string(u), true
				default:
					return nil, invalidf("policy %q: qu must be String, got %s", p.Name, typeName(v))
				}
			case "w":
				if p.Window, err = nonNegInt(v, "w", p.Name); err != nil {
					return nil, err
				}
				if p.Window == 0 {
					return nil, invalidf("policy %q: w must be non-zero", p.Name)
				}
			case "pk":
				if p.PartitionKey, err = byteSeq(v, p.Name); err != nil {
					return nil, err
				}
			default:
				if p.Other == nil {
					p.Other = make(map[string]any)
				}
				p.Other[k] = normaliseBare(v)
			}
		}
		if !haveQ {
			return nil, invalidf("policy %q: missing required q", p.Name)
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseLimit parses RateLimit field lines strictly per draft-11 (digest
// §1.2, §1.9); rules and errors as for ParsePolicy. An empty value yields
// ErrEmpty, meaning "field absent" (lim-26). The item name must be a String
// (digest §1.12 point 5, vector lim-25).
func ParseLimit(lines ...string) ([]Limit, error) {
	return parseLimit(lines, false)
}

// ParseLimitLenient is ParseLimit that also accepts a Token name (lim-25),
// flagging the item with Limit.Lenient.
func ParseLimitLenient(lines ...string) ([]Limit, error) {
	return parseLimit(lines, true)
}

func parseLimit(lines []string, lenient bool) ([]Limit, error) {
	list, err := parseList(lines)
	if err != nil {
		return nil, err
	}
	out := make([]Limit, 0, len(list))
	for i, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok {
			return nil, invalidf("member %d: service limit must be an Item, got Inner List", i)
		}
		var l Limit
		l.Name, l.Lenient, err = itemName(item.Value, i, lenient)
		if err != nil {
			return nil, err
		}
		haveR := false
		for _, k := range item.Params.Names() {
			v, _ := item.Params.Get(k)
			switch k {
			case "r":
				if l.Remaining, err = nonNegInt(v, "r", l.Name); err != nil {
					return nil, err
				}
				haveR = true
			case "t":
				if l.Window, err = nonNegInt(v, "t", l.Name); err != nil {
					return nil, err
				}
				l.HasWindow = true
			case "pk":
				if l.PartitionKey, err = byteSeq(v, l.Name); err != nil {
					return nil, err
				}
			default:
				if l.Other == nil {
					l.Other = make(map[string]any)
				}
				l.Other[k] = normaliseBare(v)
			}
		}
		if !haveR {
			return nil, invalidf("limit %q: missing required r", l.Name)
		}
		out = append(out, l)
	}
	return out, nil
}

func itemName(v any, i int, lenient bool) (name string, usedLenient bool, err error) {
	switch n := v.(type) {
	case string:
		return n, false, nil
	case httpsfv.Token:
		if lenient {
			return string(n), true, nil
		}
	}
	return "", false, invalidf("member %d: name must be String, got %s", i, typeName(v))
}

func nonNegInt(v any, key, name string) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, invalidf("%q: %s must be Integer, got %s", name, key, typeName(v))
	}
	if n < 0 {
		return 0, invalidf("%q: %s must be non-negative, got %d", name, key, n)
	}
	return n, nil
}

func byteSeq(v any, name string) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, invalidf("%q: pk must be Byte Sequence, got %s", name, typeName(v))
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}
