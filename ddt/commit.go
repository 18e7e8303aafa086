package ddt

import (
	"errors"
	"fmt"
)

// Commit validates and normalises the type into its IR (MPI_Type_commit),
// then, unless the JIT mode is off, compiles it with the registered
// Compiler. Committing twice is a no-op. Commit of a predefined type does
// nothing.
//
// Errors: ErrInvalid or ErrOverflow for a type whose bounds cannot be
// represented, ErrNotCompiled in JIT mode on when no kernel can be made.
func (t *Type) Commit() error {
	if t == nil {
		return fmt.Errorf("ddt: Commit: nil type: %w", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.Load() != nil {
		return nil
	}
	if t.size < 0 || t.trueUB < t.trueLB {
		return fmt.Errorf("ddt: Commit %s: size %d, true bounds [%d,%d): %w", t.Name(), t.size, t.trueLB, t.trueUB, ErrInvalid)
	}
	ir := t.buildIR()
	if err := t.checkIR(ir); err != nil {
		return err
	}
	mode := DefaultJITMode()
	if t.jitSet {
		mode = t.jit
	} else if err := defaultJITErr(); err != nil {
		return err
	}
	var k Kernel
	if mode != JITOff && ir.Root != nil {
		c := RegisteredCompiler()
		var err error
		switch {
		case c != nil:
			if ec, ok := c.(EagerCompiler); ok && mode == JITOn {
				k, err = ec.CompileNow(ir)
			} else {
				k, err = c.Compile(ir)
			}
			if err == nil && k == nil {
				err = fmt.Errorf("compiler returned no kernel: %w", ErrNotCompiled)
			}
		default:
			err = fmt.Errorf("no compiler registered: %w", ErrNotCompiled)
		}
		if err != nil {
			if mode == JITOn {
				if !errors.Is(err, ErrNotCompiled) { // a compiler failure: still "not compiled"
					err = fmt.Errorf("%w: %w", ErrNotCompiled, err)
				}
				return fmt.Errorf("ddt: Commit %s with WEFT_JIT=on: %w", t.Name(), err)
			}
			if c != nil && !errors.Is(err, ErrNotCompiled) {
				log.Debug("compile failed, using the interpreter", "type", t.String(), "error", err)
			}
			k = nil
		}
	}
	t.st.Store(&state{ir: ir, kernel: k})
	return nil
}

// Committed reports whether Commit has succeeded on t (false for a nil
// *Type).
func (t *Type) Committed() bool { return t != nil && t.st.Load() != nil }

// IR returns the normalised IR of a committed type, or nil before Commit
// (and for a nil *Type). The IR is shared and must not be modified.
func (t *Type) IR() *IR {
	if t == nil {
		return nil
	}
	if s := t.st.Load(); s != nil {
		return s.ir
	}
	return nil
}

// Compiled reports whether Pack/Unpack of t run a compiled Kernel (false for
// a nil *Type).
func (t *Type) Compiled() bool {
	if t == nil {
		return false
	}
	s := t.st.Load()
	return s != nil && s.kernel != nil
}

// SetJIT sets the JIT mode of t, overriding WEFT_JIT. It must be called
// before Commit; afterwards it returns ErrInvalid.
func (t *Type) SetJIT(m JITMode) error {
	if t == nil {
		return fmt.Errorf("ddt: SetJIT: nil type: %w", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.Load() != nil {
		return fmt.Errorf("ddt: SetJIT on committed %s: %w", t.Name(), ErrInvalid)
	}
	t.jit, t.jitSet = m, true
	return nil
}
