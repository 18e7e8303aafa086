package collectives

import "fmt"

// Environment variables read by New (internal/settings's registry; README's
// settings table lists them). The algorithm knobs are keys of WEFT_TUNE
// (docs/tuning.md).
const (
	// EnvDeterministic turns deterministic mode on (see Deterministic).
	EnvDeterministic = "WEFT_COLL_DETERMINISTIC"
	// EnvCheck turns argument checks on (see WithChecks).
	EnvCheck = "WEFT_COLL_CHECK"
)

// Option configures a handle at New. Every rank must give the same options
// (a difference is seen as a mismatch: the calls fail with ErrInvalid).
type Option func(*config) error

// Deterministic makes every reduction (Reduce, Allreduce,
// ReduceScatterBlock, Scan, Exscan) combine the ranks' contributions in
// rank order, ((x₀ ∘ x₁) ∘ x₂) ∘ …, element by element, so that its result
// is bitwise the same whatever algorithm runs, and the same as a serial
// loop over the ranks. Floating-point sums then do not depend on the
// message size or on WEFT_TUNE. The algorithms keep their message
// patterns but move contributions unreduced to where they are combined:
// small reductions cost p times the memory, Scan becomes a chain of p-1
// steps. Default: WEFT_COLL_DETERMINISTIC (false).
func Deterministic(on bool) Option {
	return func(c *config) error { c.det = on; return nil }
}

// WithChecks makes every collective first agree, in ⌈log₂ p⌉ rounds of
// 16-byte messages, on what each rank called (the collective, root, count,
// element size, operation and algorithm): when they differ every rank
// returns an error wrapping ErrInvalid, where without the check a
// mismatch the ranks cannot see in their messages (a root that differs
// between ranks of a Gather, say) would leave them waiting until their
// contexts end. Default: WEFT_COLL_CHECK (false).
func WithChecks(on bool) Option {
	return func(c *config) error { c.check = on; return nil }
}

// WithAlgorithm forces collective k to use algorithm a (Auto restores the
// selection by size). The algorithms each collective has are listed in
// docs/collectives.md; another pairing is an error wrapping ErrInvalid.
// WEFT_TUNE's coll* keys set the same from the environment; an option wins.
func WithAlgorithm(k Collective, a Algorithm) Option {
	return func(c *config) error { return c.setAlg(k, a) }
}

// WithThreshold sets the size, in bytes, from which collective k switches
// to its large-message algorithm when its algorithm is Auto (what the
// size counts for each collective is in docs/collectives.md).
func WithThreshold(k Collective, bytes int) Option {
	return func(c *config) error {
		if k == 0 || k >= numColl || len(algs[k]) < 2 {
			return fmt.Errorf("collectives: %s has no size threshold: %w", k, ErrInvalid)
		}
		if bytes < 0 {
			return fmt.Errorf("collectives: threshold %d bytes for %s: %w", bytes, k, ErrInvalid)
		}
		c.large[k] = bytes
		return nil
	}
}

func (c *config) setAlg(k Collective, a Algorithm) error {
	if k == 0 || k >= numColl {
		return fmt.Errorf("collectives: unknown %v: %w", k, ErrInvalid)
	}
	if a != Auto && !hasAlg(k, a) {
		return fmt.Errorf("collectives: %s has no algorithm %s: %w", k, a, ErrInvalid)
	}
	c.alg[k] = a
	return nil
}
