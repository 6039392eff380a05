package secret

import "testing"

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		got, want string
		equal     bool
	}{
		{"s3cret-token-0123", "s3cret-token-0123", true},
		{"s3cret-token-0124", "s3cret-token-0123", false},
		{"s3cret", "s3cret-token-0123", false}, // a prefix is not the token
		{"", "s3cret-token-0123", false},
		{"", "", true},
	} {
		if got := Equal(c.got, c.want); got != c.equal {
			t.Errorf("Equal(%q, %q) = %v, want %v", c.got, c.want, got, c.equal)
		}
	}
}
