package checked

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestAgainstBig compares every function with big.Int on edge and random
// values.
func TestAgainstBig(t *testing.T) {
	vals := []int64{0, 1, -1, 2, -2, 1<<31 - 1, -(1<<31 - 1), 1 << 31, -(1 << 31), 1<<32 + 7, 1 << 62, -(1 << 62),
		math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, math.MaxInt64 / 2, math.MinInt64 / 2,
		3037000499, -3037000499, 3037000500}
	r := rand.New(rand.NewPCG(4, 4))
	for range 2000 {
		vals = append(vals, r.Int64()>>r.IntN(64), -(r.Int64() >> r.IntN(64)))
	}
	check := func(name string, x, y int64, got int64, ok bool, want *big.Int) {
		t.Helper()
		if ok != want.IsInt64() || (ok && got != want.Int64()) || (!ok && got != 0) {
			t.Fatalf("%s(%d, %d) = %d, %v; want %v", name, x, y, got, ok, want)
		}
	}
	for _, a := range vals {
		for _, b := range vals[:48] {
			for _, p := range [][2]int64{{a, b}, {b, a}} {
				x, y := p[0], p[1]
				bx, by := big.NewInt(x), big.NewInt(y)
				m, ok := Mul(x, y)
				check("Mul", x, y, m, ok, new(big.Int).Mul(bx, by))
				s, ok := Add(x, y)
				check("Add", x, y, s, ok, new(big.Int).Add(bx, by))
				d, ok := Sub(x, y)
				check("Sub", x, y, d, ok, new(big.Int).Sub(bx, by))
				ma, ok := MulAdd(x, y, x)
				want := new(big.Int).Mul(bx, by)
				if want.IsInt64() {
					check("MulAdd", x, y, ma, ok, want.Add(want, bx))
				} else if ok {
					t.Fatalf("MulAdd(%d, %d, %d) = %d, true; the product overflows", x, y, x, ma)
				}
			}
		}
	}
}
