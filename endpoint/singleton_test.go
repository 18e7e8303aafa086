package endpoint_test

import "testing"

// singleton makes endpoint.Init, for the rest of t, start a job of one rank
// whatever launcher environment the test binary inherited: the tests that
// call it drive every endpoint of the job themselves, so they run the same
// whether or not the binary was started as one rank of a larger job.
func singleton(t testing.TB) {
	t.Helper()
	t.Setenv("WEFT_PMI", "singleton")
}
