package ddt

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/settings"
)

// Kernel is compiled pack/unpack code for one committed type, produced by a
// registered Compiler. Its results must be byte-for-byte identical to the
// interpreter's (Type.PackRange / Type.UnpackRange), which is the oracle.
//
// Arguments, identical for both methods:
//
//   - typed is the user's typed buffer (src of Pack, dst of Unpack);
//     packed is the packed stream window (dst of Pack, src of Unpack).
//   - base is the index in typed of displacement 0 of element 0. Byte d of
//     the type map of element k lives at typed[base + k*ir.Extent + d].
//     base may exceed len(typed) or be negative only when no touched byte
//     falls outside typed (the caller checked).
//   - count is the number of elements (≥ 0).
//   - from is the offset in the packed stream of count elements
//     (0 ≤ from ≤ count*ir.Size) that packed[0] corresponds to.
//
// Pack copies stream bytes [from, from+n) into packed[0:n] and Unpack copies
// packed[0:n] to stream bytes [from, from+n), where
// n = min(len(packed), count*ir.Size - from); both return n. A call may start
// and stop anywhere, including inside a basic element: the stream is plain
// bytes, and the next call with from+n continues exactly where this one
// stopped.
//
// Preconditions the ddt package has checked before it calls a Kernel (a
// Kernel may rely on them and skip all checks): count ≥ 0, 0 ≤ from ≤
// count*Size, and every byte the type map touches for elements 0..count-1
// (the bytes in [Lo, Hi) of every block) is inside typed. Pack may read
// typed bytes between blocks inside those bounds; Unpack writes only the
// blocks' bytes, never the gaps. typed and packed do not overlap.
//
// A Kernel must be safe for concurrent use and must not retain the slices.
// An error from a Kernel is returned to the caller of Pack/Unpack wrapped.
type Kernel interface {
	Pack(packed, typed []byte, base int64, count int, from int64) (int, error)
	Unpack(typed, packed []byte, base int64, count int, from int64) (int, error)
}

// Compiler turns the IR of a committed type into a Kernel. The IR is
// read-only and may be retained by the Kernel. Returning an error wrapping
// ErrNotCompiled declines the type quietly (the interpreter is used);
// any other error is logged (JIT mode auto) or returned by Commit (mode on).
type Compiler interface {
	Compile(ir *IR) (Kernel, error)
}

// An EagerCompiler is a Compiler with a deferral policy of its own (package
// jit compiles under JIT mode auto only once a type has moved enough data)
// that can also compile at once. Commit calls CompileNow instead of Compile
// for a type whose JIT mode is on, set per type (Type.SetJIT) or by default.
type EagerCompiler interface {
	Compiler
	CompileNow(ir *IR) (Kernel, error)
}

// ErrNotCompiled is returned by a Compiler that declines a type, and by
// Commit in JIT mode "on" when no Compiler is registered.
var ErrNotCompiled = errors.New("ddt: type not compiled")

type compilerBox struct{ c Compiler }

var compiler atomic.Pointer[compilerBox]

// SetCompiler registers the Compiler used by Commit for types committed
// afterwards (nil unregisters it). Package jit calls it from its Enable
// function or init. Types committed earlier keep what they had.
func SetCompiler(c Compiler) {
	if c == nil {
		compiler.Store(nil)
		return
	}
	compiler.Store(&compilerBox{c})
}

// RegisteredCompiler returns the Compiler set by SetCompiler, or nil.
func RegisteredCompiler() Compiler {
	if b := compiler.Load(); b != nil {
		return b.c
	}
	return nil
}

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
}

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
// fail with ErrInvalid until this is called).
func SetDefaultJITMode(m JITMode) {
	envJITErr.Store(nil)
	defaultJIT.Store(uint32(m))
}

// DefaultJITMode returns the mode set by WEFT_JIT or SetDefaultJITMode.
func DefaultJITMode() JITMode { return JITMode(defaultJIT.Load()) }
