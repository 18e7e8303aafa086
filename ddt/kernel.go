package ddt

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/ddtir"
	"github.com/weft-hpc/weft/internal/settings"
)

// Kernel packs and unpacks any window of the packed stream of a committed
// type. Type.Interpreter returns one that runs the interpreter; test kits
// (package ddttest) drive any Kernel against the reference.
//
// Arguments, identical for both methods:
//
//   - typed is the user's typed buffer (src of Pack, dst of Unpack);
//     packed is the packed stream window (dst of Pack, src of Unpack).
//   - base is the index in typed of displacement 0 of element 0. Byte d of
//     the type map of element k lives at typed[base + k*Extent + d].
//   - count is the number of elements (≥ 0).
//   - from is the offset in the packed stream of count elements
//     (0 ≤ from ≤ count*Size) that packed[0] corresponds to.
//
// Pack copies stream bytes [from, from+n) into packed[0:n] and Unpack copies
// packed[0:n] to stream bytes [from, from+n), where
// n = min(len(packed), count*Size - from); both return n. A call may start
// and stop anywhere, including inside a basic element: the stream is plain
// bytes, and the next call with from+n continues exactly where this one
// stopped. The Kernels this module hands out check their arguments like
// PackRange does (ErrInvalid, ErrOverflow, ErrBounds).
type Kernel interface {
	Pack(packed, typed []byte, base int64, count int, from int64) (int, error)
	Unpack(typed, packed []byte, base int64, count int, from int64) (int, error)
}

// ErrNotCompiled is returned by Commit in JIT mode on when no native code can
// be made for the type (no compiler registered, an architecture without a
// code generator, a declined shape).
var ErrNotCompiled = errors.New("ddt: type not compiled")

// JITMode selects whether Commit compiles types with the registered Compiler.
type JITMode uint8

const (
	// JITAuto compiles when a Compiler is registered; a compile failure
	// falls back to the interpreter (logged at debug level). The default.
	JITAuto JITMode = iota
	// JITOff never compiles: the interpreter runs every Pack/Unpack.
	JITOff
	// JITOn requires compilation: Commit fails when no Compiler is
	// registered or compilation fails (ErrNotCompiled wrapped).
	JITOn
)

// String returns "auto", "off" or "on".
func (m JITMode) String() string {
	switch m {
	case JITOff:
		return "off"
	case JITOn:
		return "on"
	}
	return "auto"
}

// ParseJITMode parses "auto", "off", "on" (also "", "0", "1", "false",
// "true"; case-insensitive).
func ParseJITMode(s string) (JITMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return JITAuto, nil
	case "off", "0", "false", "no":
		return JITOff, nil
	case "on", "1", "true", "yes":
		return JITOn, nil
	}
	return JITAuto, fmt.Errorf("ddt: WEFT_JIT=%q: want auto, on or off: %w", s, ErrInvalid)
}

var (
	defaultJIT atomic.Uint32
	// jitOff is the process-wide off switch, WEFT_JIT=off: no type gets a
	// compiled kernel, whatever its own mode or the default mode say.
	jitOff atomic.Bool
	// envJITErr is a bad WEFT_JIT (internal/settings), which Commit reports
	// for types without their own mode until SetDefaultJITMode replaces it.
	envJITErr atomic.Pointer[error]
)

func init() {
	m, err := jitFromEnv()
	if err != nil {
		envJITErr.Store(&err)
	}
	defaultJIT.Store(uint32(m))
	jitOff.Store(m == JITOff)
	ddtir.TypeIR = func(v any) *ddtir.IR {
		if t, ok := v.(*Type); ok {
			return t.ir()
		}
		return nil
	}
}

// JITDisabled reports whether WEFT_JIT=off was set when the process started.
// It is a process-wide switch: no type is compiled, not even one set to
// JITOn with SetJIT or through SetDefaultJITMode, and Commit of such a type
// succeeds with the interpreter.
func JITDisabled() bool { return jitOff.Load() }

// jitFromEnv reads WEFT_JIT; a bad value gives JITAuto and an error
// wrapping ErrInvalid that names the variable and the allowed values.
func jitFromEnv() (JITMode, error) {
	v, _, err := settings.Str("WEFT_JIT")
	if err != nil {
		return JITAuto, fmt.Errorf("ddt: %w: %w", err, ErrInvalid)
	}
	m, _ := ParseJITMode(v)
	return m, nil
}

// defaultJITErr is the error of a bad WEFT_JIT, or nil.
func defaultJITErr() error {
	if p := envJITErr.Load(); p != nil {
		return *p
	}
	return nil
}

// SetDefaultJITMode sets the mode used by Commit for types without their own
// mode (initially from WEFT_JIT, default auto; a bad WEFT_JIT makes Commit
// fail with ErrInvalid until this is called). It cannot lift the
// process-wide WEFT_JIT=off (JITDisabled).
func SetDefaultJITMode(m JITMode) {
	envJITErr.Store(nil)
	defaultJIT.Store(uint32(m))
}

// DefaultJITMode returns the mode set by WEFT_JIT or SetDefaultJITMode.
func DefaultJITMode() JITMode { return JITMode(defaultJIT.Load()) }
