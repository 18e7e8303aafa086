// Package checked is overflow-checked int64 arithmetic for the size, extent,
// offset and bounds computations of ddt, jit and onesided: each function
// returns the exact result and true, or 0 and false when the result does
// not fit in an int64. It is the one place those packages do such checks,
// so they agree on them.
package checked

import "math"

// Add returns a + b.
func Add(a, b int64) (int64, bool) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, false
	}
	return c, true
}

// Sub returns a - b.
func Sub(a, b int64) (int64, bool) {
	c := a - b
	if (c < a) != (b > 0) {
		return 0, false
	}
	return c, true
}

// Mul returns a × b.
func Mul(a, b int64) (int64, bool) {
	const lim = 1<<31 - 1
	if uint64(a+lim) <= 2*lim && uint64(b+lim) <= 2*lim {
		return a * b, true // |a|, |b| < 2^31: no overflow, no division
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

// MulAdd returns a × b + c; it reports false when the product alone does
// not fit, even where the sum would.
func MulAdd(a, b, c int64) (int64, bool) {
	p, ok := Mul(a, b)
	if !ok {
		return 0, false
	}
	return Add(p, c)
}
