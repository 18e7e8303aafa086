//go:build !cgo

package gpu

import (
	"fmt"

	"github.com/weft-hpc/weft/errs"
)

// Without cgo no GPU runtime can be loaded; plans, emitters and the
// emulator still work.

// ErrNoDevice is wrapped by OpenCUDA's error when no usable GPU is found.
var ErrNoDevice = fmt.Errorf("gpu: no CUDA device: %w", errs.ErrNotSupported)

var errNoCgo = fmt.Errorf("gpu: built without cgo: %w", errs.ErrNotSupported)

// OpenCUDA needs cgo; this build returns an error wrapping errs.ErrNotSupported.
func OpenCUDA(ordinal int) (*Device, error) { return nil, errNoCgo }

// OpenOpenCL needs cgo; this build returns an error wrapping errs.ErrNotSupported.
func OpenOpenCL(index int) (*Device, error) { return nil, errNoCgo }

// CUDADriverVersion needs cgo; this build returns an error wrapping errs.ErrNotSupported.
func CUDADriverVersion() (int, error) { return 0, errNoCgo }
