package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/readhead"
	"gopkg.in/yaml.v3"
)

// ErrInvalid is wrapped by every Errors value, so callers can test
// errors.Is(err, config.ErrInvalid) without unpacking the list.
var ErrInvalid = errors.New("config: invalid")

// MaxFileSize is the largest configuration file Load reads (1 MiB).
const MaxFileSize = 1 << 20

// Error is one problem in a configuration file.
type Error struct {
	File  string // as given to Load or Parse
	Line  int    // 1-based; 0 when the problem has no single place
	Field string // dotted path such as "rules[2].policies[0]"; "" for the file
	Msg   string
}

// Error formats as "file:line: field: message".
func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, in line order.
type Errors []Error

// Error lists the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (es Errors) Unwrap() error { return ErrInvalid }

// Load reads, parses and validates the file at path. A read failure is
// returned as it is; every problem in the content is returned at once as
// Errors.
func Load(path string) (*Config, error) {
	data, err := readhead.File(path, MaxFileSize)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, Errors{{File: path, Msg: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}}
	}
	return Parse(path, data)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse parses and validates data, naming it file in errors. It returns
// Errors for any problem.
func Parse(file string, data []byte) (*Config, error) {
	if !utf8.Valid(data) {
		return nil, Errors{notUTF8(file, data)}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && err != io.EOF {
		e := Error{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = m[2]
		}
		if strings.HasPrefix(e.Msg, "did not find expected") {
			// The parser's errors (not the scanner's) count lines from 0,
			// and leave the first one out; at the end of the file, the
			// line it names is the last.
			lines := bytes.Count(data, []byte("\n"))
			if !bytes.HasSuffix(data, []byte("\n")) {
				lines++
			}
			e.Line = max(min(e.Line+1, lines), 1)
		}
		if e.Line > 0 && strings.Contains(e.Msg, "cannot start any token") && bytes.Contains(lineOf(data, e.Line), []byte("\t")) {
			e.Msg = "a tab where YAML allows only spaces (indent with spaces)"
		}
		if line, ref, ok := unquotedEnv(data); ok {
			// The YAML parser's own message ("did not find expected ','
			// or '}'") says nothing of the cause, nor always the line.
			e.Line = line
			e.Msg = fmt.Sprintf("%s inside { } or [ ] must be quoted, e.g. '%s': YAML reads its braces as the collection's", ref, ref)
		}
		return nil, Errors{e}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Errors{{File: file, Line: extra.Line, Msg: "more than one YAML document; a configuration is one document"}}
	}
	d := &decoder{file: file, lines: map[string]int{}}
	cfg := &Config{File: file}
	if root.Kind != 0 {
		d.decode(&root, reflectValue(cfg), "")
	}
	v := validator{decoder: d, cfg: cfg}
	v.validate()
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
		return nil, d.errs
	}
	return cfg, nil
}

// notUTF8 points at the first byte of data that is not UTF-8: the YAML
// parser says only "invalid UTF-8".
func notUTF8(file string, data []byte) Error {
	bad := len(data)
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			bad = i
			break
		}
		i += size
	}
	line := 1 + bytes.Count(data[:bad], []byte("\n"))
	return Error{File: file, Line: line, Msg: fmt.Sprintf("not valid UTF-8 (byte 0x%02x); save the file as UTF-8", data[bad])}
}

// unquotedEnv explains a YAML syntax error caused by a ${...} written
// unquoted inside a flow collection ({...} or [...]), where its braces end
// the collection early. It returns the first such reference and its line
// only if the file parses once every one of them is replaced by a plain
// word, so a file broken some other way keeps the parser's own message.
func unquotedEnv(data []byte) (line int, ref string, ok bool) {
	fixed := data
	for range 100 {
		l, at, n := envInFlow(fixed)
		if at < 0 {
			break
		}
		if ref == "" {
			line, ref = l, string(fixed[at:at+n])
		}
		fixed = slices.Concat(fixed[:at], []byte("ENV"), fixed[at+n:])
	}
	var n yaml.Node
	if ref == "" || yaml.Unmarshal(fixed, &n) != nil {
		return 0, "", false
	}
	return line, ref, true
}

// envInFlow finds the first ${...} that looks unquoted inside a flow
// collection, and returns its line, offset and length (offset -1 if none).
func envInFlow(data []byte) (line, at, n int) {
	depth, quote := 0, byte(0)
	line = 1
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\n':
			line++
			if quote == '\'' || quote == '"' {
				continue // quoted scalars may span lines
			}
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n'):
			for i+1 < len(data) && data[i+1] != '\n' {
				i++ // a comment, to the end of the line
			}
		case c == '$' && depth > 0 && i+1 < len(data) && data[i+1] == '{':
			end := bytes.IndexByte(data[i:], '}')
			if end < 0 || bytes.IndexByte(data[i:i+end], '\n') >= 0 {
				end = 1
			}
			return line, i, end + 1
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth = max(depth-1, 0)
		}
	}
	return 0, -1, 0
}

// lineOf returns line n (from 1) of data, without its newline.
func lineOf(data []byte, n int) []byte {
	lines := bytes.SplitN(data, []byte("\n"), n+1)
	if n > len(lines) {
		return nil
	}
	return lines[n-1]
}
