package header

import "testing"

func TestIsToken(t *testing.T) {
	for s, want := range map[string]bool{
		"GET": true, "X-Api-Key": true, "!#$%&'*+-.^_`|~09azAZ": true,
		"": false, "FOO BAR": false, "a:b": false, "é": false, "a\tb": false,
	} {
		if got := IsToken(s); got != want {
			t.Errorf("IsToken(%q) = %v, want %v", s, got, want)
		}
	}
}
