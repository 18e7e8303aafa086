//go:build !linux

package ddt

import "testing"

// cpuLoop runs f b.N times (no CPU-time metric on this OS).
func cpuLoop(b *testing.B, f func()) {
	for b.Loop() {
		f()
	}
}
