package nilcheck

import (
	"io"
	"strings"
	"testing"
)

func TestNil(t *testing.T) {
	var p *strings.Reader
	var r io.Reader = p
	var f func()
	var m map[string]int
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"typed nil pointer", r, true},
		{"nil func", f, true},
		{"nil map", m, true},
		{"pointer", strings.NewReader(""), false},
		{"value", 3, false},
		{"empty struct", struct{}{}, false},
	} {
		if got := Nil(c.v); got != c.want {
			t.Errorf("%s: Nil = %v, want %v", c.name, got, c.want)
		}
	}
}
