//go:build !linux

package ddt_test

import "testing"

// cpuLoop runs f b.N times (no CPU-time metric on this OS).
func cpuLoop(b *testing.B, f func()) {
	for b.Loop() {
		f()
	}
}
