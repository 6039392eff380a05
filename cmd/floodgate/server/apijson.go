package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
)

// batchError says which check of a batch err, the batch's decoding error,
// comes from, when the array itself is well formed: a batch is refused
// whole for one malformed check, and the caller should not have to search.
// Offsets in the check's error count from the check's start.
func batchError(body []byte, err error) error {
	var elems []json.RawMessage
	if json.Unmarshal(body, &elems) != nil {
		return err
	}
	for i, e := range elems {
		var req CheckRequest
		if eerr := decodeValue(e, &req, "check"); eerr != nil {
			return fmt.Errorf("check %d of %d: %w", i+1, len(elems), eerr)
		}
	}
	return err
}

// decodeStrict decodes a request body, one JSON value, refusing unknown
// fields and trailing data, with messages that say where the problem is.
func decodeStrict(body []byte, v any) error { return decodeValue(body, v, "body") }

// decodeValue is decodeStrict for a body or for one check of a batch
// (what: "body" or "check"), which its messages name.
func decodeValue(body []byte, v any, what string) error {
	const ws = " \t\r\n"
	shape := "the body must be a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}, or an array of them"
	if what != "body" {
		shape = "a check must be a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}"
	}
	if len(bytes.TrimLeft(body, ws)) == 0 {
		return errors.New("empty body: send a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}")
	}
	if string(bytes.Trim(body, ws)) == "null" { // which Decode takes as no change
		return fmt.Errorf("%s; got a JSON null", shape)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return fmt.Errorf("%s is not valid JSON at byte %d: %v", what, syn.Offset, err)
		case errors.As(err, &typ) && typ.Field == "":
			return fmt.Errorf("%s; got a JSON %s", shape, typ.Value)
		case errors.As(err, &typ) && strings.HasSuffix(typ.Type.String(), "int64") && strings.HasPrefix(typ.Value, "number "):
			n := strings.TrimPrefix(typ.Value, "number ")
			if strings.Trim(n, "-0123456789") == "" {
				return fmt.Errorf("field %q: %s is out of range", typ.Field, n)
			}
			return fmt.Errorf("field %q: want a whole number written in digits, such as 5, got %s", typ.Field, n)
		case errors.As(err, &typ):
			return fmt.Errorf("field %q: want %s, got a JSON %s", typ.Field, typeName(typ.Type.String()), typ.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("%s is not valid JSON: it ends too early", what)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if what == "body" {
			return fmt.Errorf("body: %s", msg)
		}
		return errors.New(msg) // the caller names the check
	}
	// More would miss a stray ] or } after the value: it reports only
	// whether another value could start there.
	if rest := bytes.TrimLeft(body[dec.InputOffset():], ws); len(rest) > 0 {
		return fmt.Errorf("%s has data after its JSON value, at byte %d", what, len(body)-len(rest))
	}
	if name := repeatedField(body); name != "" {
		return fmt.Errorf("field %q appears twice in one object; send it once", name)
	}
	return nil
}

// repeatedField returns the first member name that appears twice in one
// object of body, a valid JSON value, or "". Names compare without regard
// to case, as encoding/json matches them to fields: {"key":"a","KEY":"b"}
// sets one field twice. encoding/json keeps the last value; a check whose
// key depends on which value a reader keeps is refused instead.
func repeatedField(body []byte) string {
	type object struct {
		names   map[string]bool
		wantKey bool
	}
	var open []*object // nil entries are arrays
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				open = append(open, &object{names: map[string]bool{}, wantKey: true})
				continue
			case '[':
				open = append(open, nil)
				continue
			}
			open = open[:len(open)-1] // a '}' or ']' ends a value of the enclosing object
		case string:
			if n := len(open); n > 0 && open[n-1] != nil && open[n-1].wantKey {
				name := strings.ToLower(t)
				if open[n-1].names[name] {
					return t
				}
				open[n-1].names[name], open[n-1].wantKey = true, false
				continue
			}
		}
		if n := len(open); n > 0 && open[n-1] != nil {
			open[n-1].wantKey = true // a member's value ended
		}
	}
}

func typeName(t string) string {
	switch t {
	case "*int64", "int64":
		return "a whole number"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	}
	return t
}

// jsonType is the Content-Type value of every JSON answer, shared: a
// header value is replaced, never written to, and appending to a slice of
// capacity 1 copies it.
var jsonType = []string{"application/json"}

// selfLength is the longest body net/http holds whole until the handler
// returns, and then sends with a Content-Length it writes itself, without
// an allocation (HTTP/1.1 buffers 2 KB, HTTP/2 4 KB); a longer body would
// go out chunked, so it gets the field from writeJSON.
const selfLength = 2 << 10

// writeJSON writes a whole JSON answer in one Write, the last of the
// handler's.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonType
	if len(body) > selfLength {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(status)
	w.Write(body)
}

// appendOutcome writes an outcome as JSON by hand: the check endpoint is
// the hot path, and reflection-based encoding was a large share of it.
//
//	{"allowed":true,"verdict":"allowed","key":"k","policy":"api","limit":100,
//	 "remaining":98,"reset":59,"units_left":99,"retry_after":0,"degraded":false,
//	 "shadow":false,"results":[{"policy":"api","allowed":true,"limit":100,
//	 "window":60,"unit":"requests","remaining":98,"reset":59,"units_left":99,
//	 "retry_after":0}]}
//
// The scalar fields are those of the summary limit (engine.Outcome): the
// refusing one with the longest wait, or else the one closest to its
// limit. remaining and reset are the r and t the RateLimit field gives
// the limit (appendPair): a client pacing itself by them spends no
// faster than the policy's limit per window. units_left is the store's
// count, what X-RateLimit-Remaining says: what may be spent at once,
// which r cuts to that pace. retry_after is the Retry-After seconds (0
// when allowed), window the policy's w (seconds; 0 for a
// concurrent-requests cap).
// verdict is "allowed", "denied", "blocked" or "reduced"; a shadow rule's
// would-be denial is allowed with "shadow":true.
func appendOutcome(b []byte, key string, o *engine.Outcome) []byte {
	var sum engine.Item
	if o.Summary >= 0 {
		sum = o.Item(o.Summary)
	}
	var retry int64
	if o.Verdict != engine.Allowed {
		retry = engine.RetryAfterSeconds(o)
	}
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, o.Verdict == engine.Allowed)
	b = append(b, `,"verdict":"`...)
	b = append(b, o.Verdict.String()...)
	b = append(b, `","key":`...)
	b = appendString(b, key)
	b = append(b, `,"policy":`...)
	b = appendString(b, sum.Name)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, sum.Quota, 10)
	b = appendPair(b, &sum)
	b = append(b, `,"retry_after":`...)
	b = strconv.AppendInt(b, retry, 10)
	b = append(b, `,"degraded":`...)
	b = strconv.AppendBool(b, o.Degraded)
	b = append(b, `,"shadow":`...)
	b = strconv.AppendBool(b, o.Shadow)
	b = append(b, `,"results":[`...)
	for i := range o.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		it := o.Item(i)
		b = appendItem(b, &it)
	}
	return append(b, "]}"...)
}

func appendItem(b []byte, it *engine.Item) []byte {
	b = append(b, `{"policy":`...)
	b = appendString(b, it.Name)
	b = append(b, `,"allowed":`...)
	b = strconv.AppendBool(b, it.Allowed)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, it.Quota, 10)
	b = append(b, `,"window":`...)
	b = strconv.AppendInt(b, header.Seconds(it.Window), 10)
	b = append(b, `,"unit":"`...)
	b = append(b, it.Unit...)
	b = append(b, '"')
	b = appendPair(b, it)
	b = append(b, `,"retry_after":`...)
	var ra int64
	if !it.Allowed {
		ra = header.Seconds(it.RetryAfter)
	}
	b = strconv.AppendInt(b, ra, 10)
	return append(b, '}')
}

// appendPair writes an item's remaining and reset, the r and t of the
// RateLimit field (engine.Spendable; for a cap, which has no window, its
// free slots and the seconds until one may free), and its units_left.
func appendPair(b []byte, it *engine.Item) []byte {
	r, t := it.Remaining, header.Seconds(it.ResetAfter)
	if it.Window > 0 {
		r, t = engine.Spendable(it)
	}
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, max(r, 0), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, `,"units_left":`...)
	return strconv.AppendInt(b, max(it.Remaining, 0), 10)
}

// appendString writes s as a JSON string; s is valid UTF-8 (checkKey).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
