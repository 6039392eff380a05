package rlqs

import (
	"maps"
	"testing"
)

// FuzzBucketKey: two bucket ids share a store key only when they are the
// same map, whatever their keys and values hold (separators, digits,
// empty strings), and the order of entries never matters.
func FuzzBucketKey(f *testing.F) {
	f.Add("name", "api", "", "", "name", "api", "tenant", "")
	f.Add("a", "1:b", "", "", "a", "1", "b", "")
	f.Add("1:a", "", "", "", "1", "a", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, k4, v4 string) {
		a := map[string]string{k1: v1, k2: v2}
		b := map[string]string{k3: v3, k4: v4}
		same := bucketKey("d", a) == bucketKey("d", b)
		if same != maps.Equal(a, b) {
			t.Fatalf("%q and %q: same key %v", a, b, same)
		}
		if bucketKey("d", a) == bucketKey("e", a) {
			t.Fatal("two domains share a key")
		}
	})
}

// TestMatch: Any matches a present key only; entries not listed are free.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		want, id map[string]string
		ok       bool
	}{
		{map[string]string{"name": Any}, map[string]string{"name": "x", "extra": "y"}, true},
		{map[string]string{"name": Any}, map[string]string{"other": "x"}, false},
		{map[string]string{"name": "a"}, map[string]string{"name": "b"}, false},
		{nil, map[string]string{"name": "b"}, true},
	} {
		if got := matches(tc.want, tc.id); got != tc.ok {
			t.Errorf("matches(%v, %v) = %v", tc.want, tc.id, got)
		}
	}
}
