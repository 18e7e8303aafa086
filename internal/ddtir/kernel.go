package ddtir

import "sync/atomic"

// Kernel is compiled pack/unpack code for one committed type, produced by
// the registered Compiler. Its results must be byte-for-byte identical to
// ddt's interpreter, which is the oracle.
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
// and stop anywhere, including inside a basic element.
//
// Preconditions package ddt has checked before it calls a Kernel (a Kernel
// relies on them and skips all checks): count ≥ 0, 0 ≤ from ≤ count*Size,
// and every byte the type map touches for elements 0..count-1 is inside
// typed. Pack may read typed bytes between blocks inside those bounds; Unpack
// writes only the blocks' bytes. typed and packed do not overlap. Because of
// these preconditions a Kernel never leaves the module: ddt calls it only
// after its own check.
//
// A Kernel must be safe for concurrent use and must not retain the slices.
type Kernel interface {
	Pack(packed, typed []byte, base int64, count int, from int64) (int, error)
	Unpack(typed, packed []byte, base int64, count int, from int64) (int, error)
}

// Deferred is implemented by a Kernel that starts out running Go code and
// generates native code later (jit's auto policy). Native reports whether
// the native code exists now; Pending whether it does not yet but will be
// generated once the type has moved enough data.
type Deferred interface {
	Native() bool
	Pending() bool
}

// Compiler turns the IR of a committed type into a Kernel. The IR is
// read-only and may be retained by the Kernel. Returning an error wrapping
// ddt.ErrNotCompiled declines the type quietly (the interpreter is used);
// any other error is logged (JIT mode auto) or returned by Commit (mode on).
type Compiler interface {
	Compile(ir *IR) (Kernel, error)
	// CompileNow compiles at once, ignoring any deferral policy of the
	// compiler: ddt calls it for types whose JIT mode is on.
	CompileNow(ir *IR) (Kernel, error)
}

type compilerBox struct{ c Compiler }

var compiler atomic.Pointer[compilerBox]

// SetCompiler registers the Compiler used by ddt's Commit for types
// committed afterwards (nil unregisters it).
func SetCompiler(c Compiler) {
	if c == nil {
		compiler.Store(nil)
		return
	}
	compiler.Store(&compilerBox{c})
}

// Registered returns the Compiler set by SetCompiler, or nil.
func Registered() Compiler {
	if b := compiler.Load(); b != nil {
		return b.c
	}
	return nil
}

// TypeIR returns the IR of a committed *ddt.Type (nil for anything else or
// an uncommitted type). Package ddt sets it at initialisation; it lets jit
// and the module's tools reach the IR without ddt exporting it.
var TypeIR func(t any) *IR
