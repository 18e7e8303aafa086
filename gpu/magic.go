package gpu

import "math/bits"

// Division by a constant without a divide instruction. A GPU has no integer
// divider: div.u64 is a call to a software routine of a few dozen
// instructions, div.u32 about half of that. Every divisor in a plan is
// known when the kernel is generated, so each quotient is one multiply-high
// and one shift (Granlund and Montgomery's method, round-up variant):
//
//	q / d == mulhi(q, m) >> l   with l = floor(log2 d), m = ceil(2^(W+l) / d)
//
// where W is the register width (32 or 64). With e = m*d - 2^(W+l) < d <
// 2^(l+1), the error term q*e/2^(W+l) stays below 1/d for every
// q < 2^(W-1), which is the bound both widths are used under: 32-bit
// index math only runs when every index is below 2^31, and 64-bit index
// math covers streams of up to 2^63 words. A power of two is a shift, and
// 1 is nothing at all.

// magic is the precomputed form of a division by d.
type magic struct {
	d     uint64 // the divisor, ≥ 1
	m     uint64 // the multiplier (0 when d is a power of two)
	shift uint   // l = floor(log2 d)
	wide  bool   // m is for 64-bit dividends (else 32-bit)
}

// newMagic returns the division by d ≥ 1 for dividends below 2^31 (wide =
// false; then d < 2^32) or below 2^63 (wide = true).
func newMagic(d uint64, wide bool) magic {
	mg := magic{d: d, shift: uint(bits.Len64(d) - 1), wide: wide}
	if d&(d-1) == 0 {
		return mg
	}
	if wide {
		// 2^(64+l) / d as a 128-bit dividend (hi = 2^l < d, so it fits).
		q, r := bits.Div64(1<<mg.shift, 0, d)
		if r != 0 {
			q++
		}
		mg.m = q
		return mg
	}
	num := uint64(1) << (32 + mg.shift)
	mg.m = num / d
	if num%d != 0 {
		mg.m++
	}
	return mg
}

// pow2 reports whether the division is a plain shift.
func (mg magic) pow2() bool { return mg.m == 0 }

// div32 computes q / d the way a 32-bit kernel does (q < 2^31).
func (mg magic) div32(q uint32) uint32 {
	if mg.pow2() {
		return q >> mg.shift
	}
	hi := uint32((uint64(q) * mg.m) >> 32)
	return hi >> mg.shift
}

// div64 computes q / d the way a 64-bit kernel does (q < 2^63).
func (mg magic) div64(q uint64) uint64 {
	if mg.pow2() {
		return q >> mg.shift
	}
	hi, _ := bits.Mul64(q, mg.m)
	return hi >> mg.shift
}
