package main

import (
	"math"
	"math/cmplx"
)

// The row transform: an in-place iterative radix-2 FFT. (The example
// carries its own, so that it imports public packages only.)

// twiddles returns e^{-2πik/n} for k < n/2.
func twiddles(n int) []complex128 {
	t := make([]complex128, n/2)
	for k := range t {
		t[k] = cmplx.Exp(complex(0, -2*math.Pi*float64(k)/float64(n)))
	}
	return t
}

// fft replaces a (its length a power of two) by its discrete Fourier
// transform X[k] = Σ_j a[j]·e^{-2πijk/n}; tw is twiddles(len(a)).
func fft(a, tw []complex128) {
	n := len(a)
	for i, j := 1, 0; i < n; i++ { // bit-reversal permutation
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			a[i], a[j] = a[j], a[i]
		}
	}
	for size := 2; size <= n; size <<= 1 { // butterflies
		half, step := size/2, n/size
		for start := 0; start < n; start += size {
			for k := range half {
				t := tw[k*step] * a[start+k+half]
				a[start+k+half] = a[start+k] - t
				a[start+k] += t
			}
		}
	}
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }
