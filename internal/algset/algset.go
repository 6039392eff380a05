// Package algset holds what every store checks of the algorithms it
// decides: that it decides every one of floodgate.Algorithms() when it is
// built, and that a policy of any other algorithm is refused, never run as
// another.
package algset

import (
	"fmt"
	"strings"

	"github.com/floodgate/floodgate"
)

// Set reports whether a store decides an algorithm.
type Set func(floodgate.Algorithm) bool

// Missing returns an error naming the first of all that s lacks, with
// where: the store's name and what to add to it.
func (s Set) Missing(all []floodgate.Algorithm, store, where string) error {
	for _, a := range all {
		if !s(a) {
			return fmt.Errorf("%s: no decision for algorithm %v: add it to %s", store, a, where)
		}
	}
	return nil
}

// Refuse returns floodgate.ErrInvalidPolicy (wrapped, naming the store and
// the policy) for the first policy whose algorithm s lacks, or nil.
func (s Set) Refuse(store string, policies []floodgate.Policy) error {
	for i := range policies {
		if a := policies[i].Algorithm; !s(a) {
			// A copy of the name: the error must not keep the caller's
			// policies, which then could not live on the caller's stack.
			name := strings.Clone(policies[i].Name)
			return fmt.Errorf("%w: %s: policy %q: algorithm %v", floodgate.ErrInvalidPolicy, store, name, a)
		}
	}
	return nil
}
