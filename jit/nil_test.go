package jit

import (
	"errors"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// TestNilCompiler: a nil *compiler behaves like the zero value.
func TestNilCompiler(t *testing.T) {
	ty, err := ddt.Vector(10, 1, 2, ddt.Float64)
	if err != nil {
		t.Fatal(err)
	}
	if err := ty.SetJIT(ddt.JITOff); err != nil {
		t.Fatal(err)
	}
	if err := ty.Commit(); err != nil {
		t.Fatal(err)
	}
	var c *compiler
	for name, f := range map[string]func(*ddtir.IR) (ddtir.Kernel, error){"Compile": c.Compile, "CompileNow": c.CompileNow} {
		k, err := f(irOf(ty))
		switch {
		case err != nil && !errors.Is(err, ddt.ErrNotCompiled):
			t.Errorf("%s: %v", name, err)
		case err == nil && k == nil:
			t.Errorf("%s: no kernel and no error", name)
		}
	}
}
