package floodgate_test

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file string
	line int // of the opening fence
	text string
}

// goSnippets returns the ```go blocks of README.md and docs/*.md.
func goSnippets(t *testing.T) []snippet {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	for _, f := range append([]string{"README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur *snippet
		for i, line := range strings.Split(string(b), "\n") {
			switch {
			case cur == nil && strings.TrimSpace(line) == "```go":
				cur = &snippet{file: f, line: i + 1}
			case cur != nil && strings.TrimSpace(line) == "```":
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.text += line + "\n"
			}
		}
	}
	return out
}

// normalized returns the non-blank lines of s with runs of white space
// made one space, so that indentation and gofmt's alignment do not count,
// and without a final " {", so that a declaration shown alone matches its
// source.
func normalized(s string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			lines = append(lines, strings.TrimSuffix(strings.Join(f, " "), " {"))
		}
	}
	return lines
}

func contains(hay, needle []string) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		match := true
		for j := range needle {
			if hay[i+j] != needle[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// TestDocSnippets: every Go snippet of README.md and docs/*.md is compiled
// and run. A whole program (package main) is run in a module of its own by
// TestReadmeModule; any other snippet must appear, line for line, in an
// example_test.go of the library's modules, whose Examples go test
// compiles and runs (make test runs every module's), or, for a
// declaration, in the source file that declares it.
func TestDocSnippets(t *testing.T) {
	var sources [][]string
	var names []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || isModule(path) && !slices.Contains(libraryModules, path)) {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") && (d.Name() == "example_test.go" || !strings.HasSuffix(path, "_test.go")) {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources, names = append(sources, normalized(string(b))), append(names, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snippets := goSnippets(t)
	if len(snippets) == 0 {
		t.Fatal("no Go snippets found")
	}
	for _, s := range snippets {
		if strings.HasPrefix(s.text, "package main\n") {
			continue
		}
		want := normalized(s.text)
		found := false
		for _, src := range sources {
			if contains(src, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s:%d: this Go snippet is in no example_test.go (nor declared as shown):\n%s", s.file, s.line, s.text)
		}
	}
}

// libraryModules are the library's modules nested in this one
// (docs/ARCHITECTURE.md, "Modules"; internal/archtest holds the same list).
var libraryModules = []string{"grpclimit", "envoyrls", "rlqs", "metrics", "ops", "tier", "tierhttp"}

// isModule reports a directory holding a module of its own (bench, deploy,
// the daemon, and the library's nested modules).
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// TestReadmeModule copies README's whole-program snippet, as printed, into
// a new module that requires this one (replaced by this checkout), then
// builds, tests and runs it and compares its output with the one README
// shows. It needs the go command and the module cache this module builds
// from (GOPROXY=off: nothing is downloaded).
func TestReadmeModule(t *testing.T) {
	var prog, shown string
	for _, s := range goSnippets(t) {
		if s.file == "README.md" && strings.HasPrefix(s.text, "package main\n") {
			prog, shown = s.text, outputAfter(t, "README.md", s.line)
		}
	}
	if prog == "" {
		t.Fatal("README.md has no whole-program Go snippet")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build README's program: %v", err)
	}
	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/readme\n\ngo 1.26.0\n\nrequire github.com/floodgate/floodgate v0.0.0\n\nreplace github.com/floodgate/floodgate => " + repo + "\n"
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": prog} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("vet", "./...")
	run("test", "./...")
	if got := run("run", "."); got != shown {
		t.Fatalf("README's program printed\n%s\nREADME shows\n%s", got, shown)
	}
}

// outputAfter returns the text of the first plain ``` block after the
// block that opens at line of file: the output shown for the program.
func outputAfter(t *testing.T, file string, line int) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fences := 0 // the program's closing fence, then the output's opening and closing ones
	var out strings.Builder
	for _, l := range strings.Split(string(b), "\n")[line:] {
		if l == "```" {
			if fences++; fences == 3 {
				return out.String()
			}
			continue
		}
		if fences == 2 {
			out.WriteString(l + "\n")
		}
	}
	t.Fatalf("%s: no output block after the program at line %d", file, line)
	return ""
}
