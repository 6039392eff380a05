package header

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Errors returned by the parsers. Every parse error wraps exactly one of them,
// so callers can tell "nothing was sent" from "something broken was sent".
var (
	// ErrEmpty means the field value is an empty List, which RFC 9651 treats
	// as the field being absent (digest §1.0). RateLimit-Policy must be
	// non-empty, so an empty value is never a valid policy field.
	ErrEmpty = errors.New("header: empty field value")
	// ErrSyntax means the value is not a valid Structured Field (RFC 9651).
	ErrSyntax = errors.New("header: structured field syntax error")
	// ErrInvalid means the value is syntactically fine but breaks a rule of
	// the field's definition (draft-11 constraint, wrong type, missing param).
	ErrInvalid = errors.New("header: invalid field value")
)

func syntaxErr(err error) error {
	return fmt.Errorf("%w: %w", ErrSyntax, err)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// prepareLines rejects non-ASCII input (RFC 9651 requires the whole field to
// be ASCII) and synthesises missing base64 padding in Byte Sequences, which
// RFC 9651 §4.2.7 asks parsers to tolerate but httpsfv rejects (vectors
// pol-16, lim-13). Lines are returned unchanged when nothing needs fixing.
func prepareLines(lines []string) ([]string, error) {
	var out []string
	for i, l := range lines {
		for j := 0; j < len(l); j++ {
			if l[j] >= 0x80 {
				return nil, syntaxErr(fmt.Errorf("non-ASCII byte at offset %d", j))
			}
		}
		if p, changed := padByteSequences(l); changed {
			if out == nil {
				out = append([]string(nil), lines...)
			}
			out[i] = p
		}
	}
	if out == nil {
		return lines, nil
	}
	return out, nil
}

func isB64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}

// padByteSequences adds "=" padding to Byte Sequences that lack it. A ':'
// starts a Byte Sequence only where a bare item may start (start of input,
// after '=', ',', '(' or whitespace); elsewhere it belongs to a Token. Strings
// and Display Strings are skipped so their content is never touched. The
// rewrite never changes whether a value parses except for the missing-padding
// case the RFC tells parsers to accept.
func padByteSequences(s string) (string, bool) {
	if strings.IndexByte(s, ':') < 0 {
		return s, false
	}
	var b []byte
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || (c == '%' && i+1 < len(s) && s[i+1] == '"'):
			if c == '%' {
				i++
			}
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && c == '"' {
					i++
				}
			}
		case c == ':' && (i == 0 || strings.IndexByte("=,( \t", s[i-1]) >= 0):
			end := strings.IndexByte(s[i+1:], ':')
			if end < 0 {
				// Unterminated: the SF parser reports it.
				i = len(s)
				continue
			}
			end += i + 1
			content := s[i+1 : end]
			core := strings.TrimRight(content, "=")
			ok := true
			for k := 0; k < len(core); k++ {
				if !isB64(core[k]) {
					ok = false
					break
				}
			}
			if need := (4 - len(core)%4) % 4; ok && len(core)%4 != 1 && len(content)-len(core) < need {
				b = append(b, s[last:end]...)
				for k := len(content) - len(core); k < need; k++ {
					b = append(b, '=')
				}
				last = end
			}
			i = end
		}
	}
	if b == nil {
		return s, false
	}
	b = append(b, s[last:]...)
	return string(b), true
}

// parseList parses field lines as one RFC 9651 List (lines are joined with
// ", ", digest §1.0).
func parseList(lines []string) (httpsfv.List, error) {
	lines, err := prepareLines(lines)
	if err != nil {
		return nil, err
	}
	l, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		return nil, syntaxErr(err)
	}
	if len(l) == 0 {
		return nil, ErrEmpty
	}
	return l, nil
}

// normaliseBare converts a parsed bare item to the types documented on
// Policy.Other: Dates become UTC so values compare equal after a round trip.
func normaliseBare(v any) any {
	if t, ok := v.(time.Time); ok {
		return t.UTC()
	}
	return v
}

// typeName names an SF bare-item type for error messages.
func typeName(v any) string {
	switch v.(type) {
	case int64:
		return "Integer"
	case float64:
		return "Decimal"
	case string:
		return "String"
	case httpsfv.Token:
		return "Token"
	case []byte:
		return "Byte Sequence"
	case bool:
		return "Boolean"
	case time.Time:
		return "Date"
	case httpsfv.DisplayString:
		return "Display String"
	case httpsfv.InnerList:
		return "Inner List"
	}
	return fmt.Sprintf("%T", v)
}
