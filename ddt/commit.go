package ddt

import (
	"errors"
	"fmt"

	"github.com/weft-hpc/weft/internal/ddtir"
)

// Commit validates and normalises the type into its IR (MPI_Type_commit),
// then, unless the JIT mode is off, compiles it with the registered compiler
// (package jit). Committing twice is a no-op. Commit of a predefined type
// does nothing.
//
// The mode is the type's own (SetJIT), else the default (WEFT_JIT or
// SetDefaultJITMode); WEFT_JIT=off at process start overrides both
// (JITDisabled).
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
	if !t.jitSet && !JITDisabled() {
		if err := defaultJITErr(); err != nil {
			return err
		}
	}
	k, err := t.compile(ir, ddtir.Registered())
	if err != nil {
		return err
	}
	t.st.Store(newState(ir, k))
	return nil
}

// jitMode returns the mode Commit applies to t: off when JITDisabled, else
// t's own mode, else the default.
func (t *Type) jitMode() JITMode {
	switch {
	case JITDisabled():
		return JITOff
	case t.jitSet:
		return t.jit
	}
	return DefaultJITMode()
}

// compile asks c (nil: none registered) for a kernel for ir according to t's
// JIT mode. A nil kernel and nil error mean the interpreter runs t.
func (t *Type) compile(ir *ddtir.IR, c ddtir.Compiler) (ddtir.Kernel, error) {
	mode := t.jitMode()
	if mode == JITOff || ir.Root == nil {
		return nil, nil
	}
	var k ddtir.Kernel
	var err error
	switch {
	case c == nil:
		err = fmt.Errorf("no compiler registered: %w", ErrNotCompiled)
	case mode == JITOn:
		k, err = c.CompileNow(ir)
	default:
		k, err = c.Compile(ir)
	}
	if err == nil && k == nil {
		err = fmt.Errorf("compiler returned no kernel: %w", ErrNotCompiled)
	}
	if err == nil {
		return k, nil
	}
	if mode == JITOn {
		if !errors.Is(err, ErrNotCompiled) { // a compiler failure: still "not compiled"
			err = fmt.Errorf("%w: %w", ErrNotCompiled, err)
		}
		return nil, fmt.Errorf("ddt: Commit %s with JIT mode on: %w", t.Name(), err)
	}
	if c != nil && !errors.Is(err, ErrNotCompiled) {
		log.Debug("compile failed, using the interpreter", "type", t.String(), "error", err)
	}
	return nil, nil
}

// Committed reports whether Commit has succeeded on t (false for a nil
// *Type).
func (t *Type) Committed() bool { return t != nil && t.st.Load() != nil }

// ir returns the IR of a committed type, or nil. The IR never leaves the
// module: the bounds check reads it before unchecked code runs.
func (t *Type) ir() *ddtir.IR {
	if t == nil {
		return nil
	}
	if s := t.st.Load(); s != nil {
		return s.ir
	}
	return nil
}

// DumpIR returns the normalised IR of a committed type in the text form of
// docs/ddt-ir.md, for example
//
//	ir size=72 extent=8192 lb=0 true_lb=0 true_extent=7784 align=8 elem=8
//	  loop count=9 stride=968 size=72 align=8
//	    block len=8 size=8 align=8
//
// or "" before Commit (and for a nil *Type). The text is canonical: two
// types with the same DumpIR copy the same bytes in the same order.
func (t *Type) DumpIR() string {
	ir := t.ir()
	if ir == nil {
		return ""
	}
	return ir.String()
}

// Compiled reports whether Pack/Unpack of t run native code now (false for
// a nil *Type). Under JIT mode auto a type may start interpreted and become
// compiled after it has moved enough data (JITPending).
func (t *Type) Compiled() bool {
	if t == nil {
		return false
	}
	s := t.st.Load()
	if s == nil || s.kernel == nil {
		return false
	}
	if d, ok := s.kernel.(ddtir.Deferred); ok {
		return d.Native()
	}
	return true
}

// JITPending reports whether t is not compiled yet but will be once it has
// moved enough data under JIT mode auto (false for a nil *Type).
func (t *Type) JITPending() bool {
	if t == nil {
		return false
	}
	s := t.st.Load()
	if s == nil || s.kernel == nil {
		return false
	}
	d, ok := s.kernel.(ddtir.Deferred)
	return ok && d.Pending()
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
