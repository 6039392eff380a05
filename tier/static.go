package tier

import (
	"context"
	"fmt"
	"slices"
)

// StaticKey is one API key of a Static source, as configuration gives it.
type StaticKey struct {
	// Hash is the SHA-256 of the key (see HashKey, ParseHash); the secret
	// itself never appears in configuration.
	Hash     Hash
	Tenant   string
	Tier     string
	Disabled bool
}

// Static is a Source fixed at construction, for keys kept in the
// configuration file. It needs no Cache.
type Static struct {
	keys map[Hash]staticEntry
}

type staticEntry struct {
	entry    Entry
	disabled bool
}

// NewStatic builds a Static source from tiers (tier name → limits) and
// keys. Errors: ErrInvalidTier for a tier with no or invalid policies, and
// an error naming the key's ID for an empty tenant, a tier not in tiers,
// or a hash given twice.
func NewStatic(tiers map[string]Limits, keys []StaticKey) (*Static, error) {
	for name, l := range tiers {
		if err := checkTier(name, l); err != nil {
			return nil, err
		}
	}
	// One copy per tier, shared by its keys: the caller may reuse its map.
	own := make(map[string]Limits, len(tiers))
	for name, l := range tiers {
		own[name] = Limits{Policies: slices.Clone(l.Policies), Concurrency: slices.Clone(l.Concurrency)}
	}
	s := &Static{keys: make(map[Hash]staticEntry, len(keys))}
	for _, k := range keys {
		ps, ok := own[k.Tier]
		switch {
		case k.Tenant == "":
			return nil, fmt.Errorf("tier: key %s: empty tenant", k.Hash.ID())
		case !ok:
			return nil, fmt.Errorf("tier: key %s: unknown tier %q", k.Hash.ID(), k.Tier)
		}
		if _, dup := s.keys[k.Hash]; dup {
			return nil, fmt.Errorf("tier: key %s given twice", k.Hash.ID())
		}
		s.keys[k.Hash] = staticEntry{
			entry:    Entry{Tenant: k.Tenant, Tier: k.Tier, Limits: ps},
			disabled: k.Disabled,
		}
	}
	return s, nil
}

// Lookup implements Source; it never fails other than with ErrUnknownKey
// or ErrDisabledKey.
func (s *Static) Lookup(_ context.Context, h Hash) (Entry, error) {
	e, ok := s.keys[h]
	switch {
	case !ok:
		return Entry{}, ErrUnknownKey
	case e.disabled:
		return Entry{}, ErrDisabledKey
	}
	return e.entry, nil
}
