package tier

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/floodgate/floodgate"
)

var (
	// ErrUnknownKey is returned by Source.Lookup for a key it has no record of.
	ErrUnknownKey = errors.New("tier: unknown API key")
	// ErrDisabledKey is returned by Source.Lookup for a key that exists but
	// is disabled (revoked).
	ErrDisabledKey = errors.New("tier: disabled API key")
	// ErrUnavailable wraps a source's failure to answer at all: a database
	// that is down, slow or refusing connections.
	ErrUnavailable = errors.New("tier: source unavailable")
	// ErrInvalidTier wraps a tier whose policies cannot be enforced: none,
	// or one failing floodgate.ValidatePolicies.
	ErrInvalidTier = errors.New("tier: invalid tier")
)

// Hash is the SHA-256 of an API key: the only form in which keys are
// stored, looked up and compared.
type Hash [sha256.Size]byte

// HashKey returns the SHA-256 of the API key's bytes, exactly as sent.
func HashKey(key string) Hash { return sha256.Sum256([]byte(key)) }

// String returns the hash as 64 lowercase hex digits.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ID returns the first 16 hex digits of the hash: a short handle that
// names a key in listings and logs without revealing it. It equals
// the partition key httplimit.APIKey gives the key.
func (h Hash) ID() string { return hex.EncodeToString(h[:8]) }

// ParseHash reads 64 hex digits (either case), as String writes them.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("tier: key hash must be %d hex digits, got %d characters", 2*len(h), len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("tier: key hash: %w", err)
	}
	return h, nil
}

// KeyPrefix starts every key NewKey makes, so a leaked key is easy to
// recognise in code, logs and secret scanners.
const KeyPrefix = "fg_"

// NewKey returns a new random API key: KeyPrefix and 43 base64url
// characters carrying 256 random bits.
func NewKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("tier: random key: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Entry is what an enabled API key resolves to.
type Entry struct {
	// Tenant owns the key; limits are counted per tenant by default, so
	// all keys of one tenant share its quota.
	Tenant string
	// Tier names the plan; it is the engine.Plan name.
	Tier string
	// Limits are the tier's limits, valid per Limits.Validate. Callers
	// must not modify the slices: sources and caches share them.
	Limits
}

// Limits are a tier's rate policies and in-flight caps.
type Limits struct {
	Policies    []floodgate.Policy
	Concurrency []floodgate.Concurrency
}

// Validate checks that l has at least one limit, each valid, with no name
// used twice. Errors are *floodgate.PolicyError.
func (l Limits) Validate() error {
	if len(l.Policies) == 0 && len(l.Concurrency) == 0 {
		return &floodgate.PolicyError{Msg: "no policies"}
	}
	return floodgate.ValidateLimits(l.Policies, l.Concurrency)
}

// Source resolves API keys. Implementations must be safe for concurrent use.
type Source interface {
	// Lookup returns the entry of the key with hash h.
	//
	// Errors: ErrUnknownKey and ErrDisabledKey (possibly wrapped) are
	// answers about the key; ErrInvalidTier wraps a tier that cannot be
	// enforced; any other error, typically wrapping ErrUnavailable, means
	// the source could not answer.
	Lookup(ctx context.Context, h Hash) (Entry, error)
}

// isAnswer reports whether err is a definite answer about a key, one a
// cache may keep, rather than a failure to answer.
func isAnswer(err error) bool {
	return errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrDisabledKey)
}

// checkTier validates a tier's limits for Sources.
func checkTier(name string, limits Limits) error {
	if name == "" {
		return fmt.Errorf("%w: empty tier name", ErrInvalidTier)
	}
	if err := limits.Validate(); err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidTier, name, err)
	}
	return nil
}
