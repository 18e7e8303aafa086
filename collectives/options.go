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
	// EnvProgress turns the progress goroutine on (see WithProgress).
	EnvProgress = "WEFT_COLL_PROGRESS"
	// EnvTable names a selection table file that New loads (see Table
	// and WithTable), as a tuning run writes it (Tune; go run
	// ./test/bench/osu -tune FILE). Default: none.
	EnvTable = "WEFT_COLL_TABLE"
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
// size counts for each collective is in docs/collectives.md). It wins
// over a selection table (WithTable) for k, as does WEFT_TUNE's key.
func WithThreshold(k Collective, bytes int) Option {
	return func(c *config) error {
		if k == 0 || k >= numColl || len(algs[k]) < 2 {
			return fmt.Errorf("collectives: %s has no size threshold: %w", k, ErrInvalid)
		}
		if bytes < 0 {
			return fmt.Errorf("collectives: threshold %d bytes for %s: %w", bytes, k, ErrInvalid)
		}
		c.large[k], c.thr[k] = bytes, true
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

// WithProgress makes the process's progress goroutine drive the handle's
// nonblocking collectives, so that they advance while the goroutine that
// started them computes, without it calling Test. The goroutine (one per
// process, started by the first such collective) polls while collectives
// of such handles are outstanding, yielding between polls and sleeping up
// to 50 µs while none moves, and sleeps on a channel otherwise: it costs
// processor time only while collectives are in flight. Without it a
// nonblocking collective advances only when its handle is driven (Test,
// Wait, another collective on the handle). Every rank should give the
// same setting; it changes no message. Default: WEFT_COLL_PROGRESS
// (false).
func WithProgress(on bool) Option {
	return func(c *config) error { c.progress = on; return nil }
}
