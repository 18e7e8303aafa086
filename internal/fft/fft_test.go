package fft

import (
	"math"
	"math/cmplx"
	"testing"
)

// TestForwardMatchesDFT: the FFT equals the direct sum for every length
// up to 256.
func TestForwardMatchesDFT(t *testing.T) {
	for n := 1; n <= 256; n *= 2 {
		a := make([]complex128, n)
		for i := range a {
			a[i] = complex(float64((i*7)%11)-5, float64(i%3))
		}
		want := make([]complex128, n)
		for k := range want {
			for j, v := range a {
				want[k] += v * cmplx.Exp(complex(0, -2*math.Pi*float64(j*k%n)/float64(n)))
			}
		}
		Forward(a, Twiddles(n))
		for k := range a {
			if d := cmplx.Abs(a[k] - want[k]); d > 1e-9*float64(n) {
				t.Fatalf("n=%d: X[%d] = %v, want %v", n, k, a[k], want[k])
			}
		}
	}
	if IsPow2(0) || IsPow2(6) || !IsPow2(1) || !IsPow2(64) {
		t.Error("IsPow2 wrong")
	}
}
