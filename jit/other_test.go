//go:build !amd64

package jit

import (
	"errors"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestUnsupportedArch: on architectures without a code generator the
// package declines every type and ddt keeps its interpreter.
func TestUnsupportedArch(t *testing.T) {
	if err := Enable(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Enable: %v, want ErrUnsupported", err)
	}
	ty, err := ddt.Vector(10, 1, 2, ddt.Float64)
	if err != nil {
		t.Fatal(err)
	}
	if err := ty.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := (&compiler{}).Compile(irOf(ty)); !errors.Is(err, ddt.ErrNotCompiled) {
		t.Fatalf("Compile: %v, want ErrNotCompiled", err)
	}
}
