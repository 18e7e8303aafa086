package ddt

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestCheckedArithmetic compares mulC and addC with big.Int on edge and
// random values.
func TestCheckedArithmetic(t *testing.T) {
	vals := []int64{0, 1, -1, 2, -2, 1<<31 - 1, -(1<<31 - 1), 1 << 31, -(1 << 31), 1<<32 + 7, math.MaxInt64, math.MinInt64, math.MaxInt64 / 2, math.MinInt64 / 2, 3037000499, -3037000499, 3037000500}
	r := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 2000; i++ {
		vals = append(vals, r.Int64()>>r.IntN(64), -(r.Int64() >> r.IntN(64)))
	}
	fits := func(z *big.Int) bool { return z.IsInt64() }
	for _, a := range vals {
		for _, b := range vals[:40] {
			for _, p := range [][2]int64{{a, b}, {b, a}} {
				x, y := p[0], p[1]
				m, ok := mulC(x, y)
				want := new(big.Int).Mul(big.NewInt(x), big.NewInt(y))
				if ok != fits(want) || (ok && m != want.Int64()) {
					t.Fatalf("mulC(%d, %d) = %d, %v; want %v", x, y, m, ok, want)
				}
				s, ok := addC(x, y)
				wants := new(big.Int).Add(big.NewInt(x), big.NewInt(y))
				if ok != fits(wants) || (ok && s != wants.Int64()) {
					t.Fatalf("addC(%d, %d) = %d, %v; want %v", x, y, s, ok, wants)
				}
			}
		}
	}
}
