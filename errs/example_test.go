package errs_test

import (
	"errors"
	"fmt"

	"github.com/weft-hpc/weft/errs"
)

// Errors from any weft package wrap one of the shared sentinels, so a
// caller tests for a class of failure once.
func Example() {
	err := fmt.Errorf("onesided: Put to rank 7: %w", errs.ErrInvalid)
	fmt.Println(errors.Is(err, errs.ErrInvalid), errors.Is(err, errs.ErrTimeout))
	// Output: true false
}
