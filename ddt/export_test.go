package ddt

import "github.com/weft-hpc/weft/internal/ddtir"

// Hooks for the external tests of package ddt_test.

// Fresh returns an uncommitted copy of t (same children), so a benchmark can
// commit the same tree repeatedly.
func Fresh(t *Type) *Type {
	return &Type{comb: t.comb, name: t.name, ints: t.ints, addrs: t.addrs, types: t.types, impl: t.impl,
		size: t.size, lb: t.lb, ub: t.ub, trueLB: t.trueLB, trueUB: t.trueUB, stickyLB: t.stickyLB,
		stickyUB: t.stickyUB, align: t.align, elem: t.elem, jit: JITOff, jitSet: true}
}

// IROf returns the IR of a committed type (nil before Commit).
func IROf(t *Type) *ddtir.IR { return t.ir() }

// Validate checks the structural invariants of an IR tree.
func Validate(n *ddtir.Node) error { return validate(n, map[*ddtir.Node]bool{}) }

// NormSteps returns the number of normalisation and validation steps
// (nodes built or checked) taken by all Commits so far.
func NormSteps() int64 { return normSteps.Load() }

// SetJITDisabled sets the process-wide WEFT_JIT=off switch and returns a
// function restoring the previous value.
func SetJITDisabled(off bool) (restore func()) {
	old := jitOff.Swap(off)
	return func() { jitOff.Store(old) }
}

// GridTile is gridTile: the columns per tile of a grid walk (0: none).
var GridTile = gridTile
