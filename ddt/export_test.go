package ddt

// Hooks for the external tests of package ddt_test.

// Fresh returns an uncommitted copy of t (same children), so a benchmark can
// commit the same tree repeatedly.
func Fresh(t *Type) *Type {
	return &Type{comb: t.comb, name: t.name, ints: t.ints, addrs: t.addrs, types: t.types, impl: t.impl,
		size: t.size, lb: t.lb, ub: t.ub, trueLB: t.trueLB, trueUB: t.trueUB, stickyLB: t.stickyLB,
		stickyUB: t.stickyUB, align: t.align, elem: t.elem, jit: JITOff, jitSet: true}
}

// Validate checks the structural invariants of an IR tree.
func Validate(n *Node) error { return validate(n, map[*Node]bool{}) }

// NormSteps returns the number of normalisation and validation steps
// (nodes built or checked) taken by all Commits so far.
func NormSteps() int64 { return normSteps.Load() }
