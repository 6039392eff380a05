package config

import (
	"slices"
	"testing"
)

// TestStoreKinds: store.type and ops.reductions take the kinds of
// StoreKinds and nothing else, each error at its line; a kind's section
// beside another kind of store is unused, so an error.
func TestStoreKinds(t *testing.T) {
	if got := StoreKinds(); !slices.Equal(got, []string{"memory", "redis"}) || got[0] != DefaultStoreType {
		t.Fatalf("StoreKinds() = %q, want the default first", got)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown kind", minimal + "store:\n  type: etcd\n", `f.yaml:3: store.type: unknown store "etcd" (want memory or redis)`},
		{"redis section, memory store", minimal + "store:\n  type: memory\n  redis: {url: 'redis://127.0.0.1:6379'}\n", `f.yaml:4: store.redis: store.type is "memory", so this section is unused; set store.type: redis`},
		{"memory section, redis store", minimal + "store:\n  type: redis\n  redis: {url: 'redis://127.0.0.1:6379'}\n  memory: {max_keys: 10}\n", `f.yaml:5: store.memory: store.type is "redis", so this section is unused; set store.type: memory`},
		{"unknown reductions", minimal + "ops:\n  reductions: disk\n", `f.yaml:3: ops.reductions: unknown backend "disk" (want memory or redis)`},
		{"redis reductions, memory store", minimal + "ops:\n  reductions: redis\n", `f.yaml:3: ops.reductions: redis reductions need store.type redis (they use store.redis)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseErr(t, tc.yaml); got != tc.want {
				t.Errorf("error:\n %s\nwant:\n %s", got, tc.want)
			}
		})
	}
	for yaml, want := range map[string]string{
		minimal: "memory",
		minimal + "store: {type: redis, redis: {url: 'redis://127.0.0.1:6379'}}\n":                            "redis",
		minimal + "store: {type: redis, redis: {url: 'redis://127.0.0.1:6379'}}\nops: {reductions: memory}\n": "memory",
	} {
		c, err := Parse("f.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if c.Ops.Reductions != want {
			t.Errorf("%q: reductions %q, want %q", yaml, c.Ops.Reductions, want)
		}
	}
}
