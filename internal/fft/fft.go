// Package fft is a small in-place radix-2 FFT on complex128, the compute
// kernel of the overlap benchmark and of examples/fft2d.
package fft

import (
	"math"
	"math/cmplx"
)

// Twiddles returns e^{-2πik/n} for k < n/2, the factors Forward needs for
// a transform of length n.
func Twiddles(n int) []complex128 {
	t := make([]complex128, n/2)
	for k := range t {
		t[k] = cmplx.Exp(complex(0, -2*math.Pi*float64(k)/float64(n)))
	}
	return t
}

// Forward replaces a, whose length n is a power of two, by its discrete
// Fourier transform X[k] = Σ_j a[j]·e^{-2πijk/n}; tw is Twiddles(n).
func Forward(a []complex128, tw []complex128) {
	n := len(a)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			a[i], a[j] = a[j], a[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		half, step := size/2, n/size
		for start := 0; start < n; start += size {
			for k := 0; k < half; k++ {
				t := tw[k*step] * a[start+k+half]
				a[start+k+half] = a[start+k] - t
				a[start+k] += t
			}
		}
	}
}

// IsPow2 reports whether n is a power of two (1 included).
func IsPow2(n int) bool { return n > 0 && n&(n-1) == 0 }
