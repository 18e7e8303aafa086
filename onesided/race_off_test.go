//go:build !race

package onesided

// raceEnabled: built with -race (allocation counts then differ).
const raceEnabled = false
