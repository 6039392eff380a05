package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/floodgate/floodgate"
)

// decoder fills Go values from a yaml.Node tree, recording the line of
// every field it meets so later checks can point at it. Unlike
// yaml.Decoder it keeps going after an error, so one run reports every
// unknown field and every badly typed value.
type decoder struct {
	file  string
	errs  Errors
	lines map[string]int // field path -> line
	depth int
	nodes int // nodes visited, aliases counted each time they are expanded
}

// maxNodes bounds alias expansion: a few self-referencing aliases would
// otherwise unfold into billions of nodes.
const maxNodes = 100_000

const maxDepth = 64 // no valid file nests this deep; aliases could loop

func (d *decoder) errorf(line int, field, format string, args ...any) {
	d.errs = append(d.errs, Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

var durationType = reflect.TypeFor[Duration]()

// decode stores n into v (settable), naming it path in errors.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	// Each alias followed below counts as a level too; all are undone on
	// return, so siblings start from the same depth.
	saved := d.depth
	defer func() { d.depth = saved }()
	d.depth++
	d.nodes++
	if d.nodes == maxNodes {
		d.errorf(n.Line, path, "the file expands to more than %d values (aliases referring to themselves?)", maxNodes)
	}
	if d.nodes >= maxNodes {
		return
	}
	if d.depth > maxDepth {
		d.errorf(n.Line, path, "nested too deeply")
		return
	}
	for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		if n.Kind == yaml.DocumentNode {
			if len(n.Content) == 0 {
				return
			}
			n = n.Content[0]
		} else {
			if n.Alias == nil {
				return
			}
			n = n.Alias
		}
		d.depth++
		if d.depth > maxDepth {
			d.errorf(n.Line, path, "nested too deeply")
			return
		}
	}
	if path != "" {
		if _, seen := d.lines[path]; !seen {
			d.lines[path] = n.Line
		}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "field:" or "field: ~" leaves the default
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	default:
		d.decodeScalar(n, v, path)
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "want a mapping of fields, got %s", describe(n))
		return
	}
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("yaml")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		names = append(names, tag)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		fp := join(path, key)
		idx, ok := fields[key]
		if !ok {
			d.errorf(k.Line, fp, "unknown field%s (known: %s)", suggest(key, names), strings.Join(names, ", "))
			continue
		}
		if seen[key] {
			d.errorf(k.Line, fp, "field given twice")
			continue
		}
		seen[key] = true
		d.lines[fp] = k.Line
		d.decode(val, v.Field(idx), fp)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "want a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		fp := join(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			d.errorf(k.Line, path, "a key must be a plain name, got %s", describe(k))
			continue
		}
		key := reflect.ValueOf(k.Value)
		if v.MapIndex(key).IsValid() {
			d.errorf(k.Line, fp, "name given twice")
			continue
		}
		d.lines[fp] = k.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, fp)
		v.SetMapIndex(key, elem)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	items := n.Content
	if n.Kind == yaml.ScalarNode {
		items = []*yaml.Node{n} // "policies: login" reads as [login]
	} else if n.Kind != yaml.SequenceNode {
		d.errorf(n.Line, path, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, item := range items {
		d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, path, "want a single value, got %s", describe(n))
		return
	}
	s, err := expandEnv(n.Value)
	if err != nil {
		d.errorf(n.Line, path, "%v", err)
		return
	}
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		// The library's own types (floodgate.Algorithm, engine.Mode, ...)
		// parse themselves; their errors are the message.
		if err := u.UnmarshalText([]byte(s)); err != nil {
			d.errorf(n.Line, path, "%s", libraryMessage(err))
		}
		return
	}
	if v.Type() == durationType {
		dur, err := parseDuration(s)
		if err != nil {
			d.errorf(n.Line, path, "%v", err)
			return
		}
		v.SetInt(int64(dur))
		return
	}
	d.decodeKind(n, v, path, s)
}

// decodeKind stores the expanded scalar s into v by v's kind.
func (d *decoder) decodeKind(n *yaml.Node, v reflect.Value, path, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, ok := map[string]bool{"true": true, "false": false}[s]
		if !ok {
			d.errorf(n.Line, path, "want true or false, got %q", s)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		d.decodeInt(n, v, path, s)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.errorf(n.Line, path, "want a number, got %q", s)
			return
		}
		v.SetFloat(f)
	default:
		d.errorf(n.Line, path, "cannot hold a value of type %s", v.Type())
	}
}

func (d *decoder) decodeInt(n *yaml.Node, v reflect.Value, path, s string) {
	i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		d.errorf(n.Line, path, "%s is out of range (at most %d)", s, int64(math.MaxInt64))
		return
	}
	if err != nil {
		d.errorf(n.Line, path, "want a whole number, got %q", s)
		return
	}
	if v.Kind() == reflect.Int && (i > math.MaxInt32 || i < math.MinInt32) {
		d.errorf(n.Line, path, "%d is out of range", i)
		return
	}
	v.SetInt(i)
}

// libraryMessage is what a file's reader is told of a library error: a
// *floodgate.PolicyError without its prefix, since the file's line and
// field say where; any other error as it is.
func libraryMessage(err error) string {
	var pe *floodgate.PolicyError
	if errors.As(err, &pe) {
		return pe.Detail()
	}
	return err.Error()
}

// durationShape is a well-formed Go duration, so that one ParseDuration
// refuses can only be too long.
var durationShape = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`)

// parseDuration reads a Go duration, also accepting a "d" (24h) suffix and
// a bare 0.
func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > 365*100 {
			return 0, fmt.Errorf("bad duration %q (want e.g. \"500ms\", \"30s\", \"1m\", \"1h\" or \"1d\")", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil && strings.Contains(err.Error(), "invalid duration") && durationShape.MatchString(s) {
		return 0, fmt.Errorf("duration %q is out of range (at most about 292 years)", s)
	}
	if err != nil {
		return 0, fmt.Errorf("bad duration %q (want e.g. \"500ms\", \"30s\", \"1m\", \"1h\" or \"1d\")", s)
	}
	return dur, nil
}

// expandEnv replaces ${NAME} and ${NAME:-default} with the environment's
// value; "$$" is a literal "$" and a "$" before anything else stays as it is.
func expandEnv(s string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unclosed ${ in %q", s)
			}
			expr := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(expr, ":-")
			if !validEnvName(name) {
				return "", fmt.Errorf("bad environment variable name %q in %q", name, s)
			}
			val, ok := os.LookupEnv(name)
			switch {
			case ok && val != "":
				b.WriteString(val)
			case hasDef:
				b.WriteString(def)
			case ok:
				// set but empty: an explicit choice
			default:
				return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} for a fallback)", name, name)
			}
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// knownPolicies completes an unknown-policy error: a near miss, and the
// names defined, or that there are none (a misspelt policies: section).
func knownPolicies[V any](name string, defined map[string]V) string {
	names := sortedKeys(defined)
	if len(names) == 0 {
		return " (no policies are defined: is the policies: section missing or misspelt?)"
	}
	return fmt.Sprintf("%s (defined: %s)", suggest(name, names), strings.Join(names, ", "))
}

// suggest returns ` (did you mean "x"?)` for a near miss among names.
func suggest(got string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if dist := editDistance(strings.ToLower(got), n); dist < bestD {
			best, bestD = n, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = slices.Min([]int{prev[j] + 1, cur[j-1] + 1, prev[j-1] + cost})
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
