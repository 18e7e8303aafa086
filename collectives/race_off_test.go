//go:build !race

package collectives_test

// raceEnabled: built with -race (allocation counts then differ).
const raceEnabled = false
