//go:build race

package testenv

// Race tells whether the race detector is built in: its instrumentation
// allocates, so allocation counts and timings differ.
const Race = true
