//go:build !amd64

package jit

import (
	"fmt"

	"github.com/weft-hpc/weft/ddt"
)

func supported() error {
	return fmt.Errorf("%w: no code generator for this architecture", ErrUnsupported)
}

func compileIR(ir *ddt.IR, f Features) (ddt.Kernel, error) {
	return nil, fmt.Errorf("%w: %w", supported(), ddt.ErrNotCompiled)
}
