//go:build !amd64

package jit

import (
	"fmt"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/ddtir"
)

func supported() error {
	return fmt.Errorf("%w: no code generator for this architecture", ErrUnsupported)
}

func compileIR(ir *ddtir.IR, f Features) (ddtir.Kernel, error) {
	return compileWith(ir, f, defaultConfig)
}

func compileWith(ir *ddtir.IR, f Features, cfg *config) (ddtir.Kernel, error) {
	return nil, fmt.Errorf("%w: %w", supported(), ddt.ErrNotCompiled)
}
