package ddt

import (
	"fmt"

	"github.com/weft-hpc/weft/internal/checked"
)

// Distribution is how Darray spreads one dimension of a global array over
// the processes of that dimension of the process grid.
type Distribution uint8

const (
	// DistributeBlock gives each process one block of consecutive
	// indices (MPI_DISTRIBUTE_BLOCK).
	DistributeBlock Distribution = iota + 1
	// DistributeCyclic deals blocks of the dimension's argument out to
	// the processes in turn (MPI_DISTRIBUTE_CYCLIC).
	DistributeCyclic
	// DistributeNone leaves the dimension whole on every process
	// (MPI_DISTRIBUTE_NONE); its process-grid size must be 1.
	DistributeNone
)

// DistributeDefaultArg, as a Darray argument, asks for the
// distribution's default block size (MPI_DISTRIBUTE_DFLT_DARG): the
// indices divided evenly, rounded up, for a block distribution, 1 for a
// cyclic one.
const DistributeDefaultArg = -1

// Darray returns the part of a global array of gsizes elements of old,
// stored in the given order, that process rank of size owns when each
// dimension i is distributed over psizes[i] processes as distribs[i] says
// with block size dargs[i] (MPI_Type_create_darray, as used for HPF-style
// and ScaLAPACK block-cyclic layouts). The process grid is row-major
// whatever the order, as endpoint's Cartesian topologies: rank's
// coordinate in the last dimension varies fastest. The type's elements
// are the owned ones in the global array's storage order; its lb is 0
// and its extent the whole global array, so a process's part of a file
// or of a gathered global array sits where the array has it.
//
// It returns ErrInvalid when the lengths differ, the product of psizes is
// not size, rank is outside [0, size), a size is not positive, a
// distribution is unknown, a DistributeNone dimension has more than one
// process, a darg is neither positive nor DistributeDefaultArg, or a
// block distribution's blocks cannot cover their dimension.
func Darray(size, rank int, gsizes []int, distribs []Distribution, dargs, psizes []int, order Order, old *Type) (*Type, error) {
	const what = "Darray"
	if err := checkType(what, old); err != nil {
		return nil, err
	}
	n := len(gsizes)
	if n == 0 || len(distribs) != n || len(dargs) != n || len(psizes) != n {
		return nil, fmt.Errorf("ddt: %s: %d gsizes, %d distribs, %d dargs, %d psizes: %w",
			what, n, len(distribs), len(dargs), len(psizes), ErrInvalid)
	}
	if order != OrderC && order != OrderFortran {
		return nil, fmt.Errorf("ddt: %s: order %d: %w", what, order, ErrInvalid)
	}
	procs := 1
	for i := range n {
		if gsizes[i] <= 0 || psizes[i] <= 0 {
			return nil, fmt.Errorf("ddt: %s: dimension %d: gsize %d, psize %d: %w", what, i, gsizes[i], psizes[i], ErrInvalid)
		}
		p, ok := checked.Mul(int64(procs), int64(psizes[i]))
		if !ok || p > int64(^uint(0)>>1) {
			return nil, fmt.Errorf("ddt: %s: process grid %v: %w", what, psizes, ErrOverflow)
		}
		procs = int(p)
	}
	if procs != size || rank < 0 || rank >= size {
		return nil, fmt.Errorf("ddt: %s: rank %d of %d on a process grid %v of %d: %w", what, rank, size, psizes, procs, ErrInvalid)
	}
	blks := make([]int, n)
	for i := range n {
		b, err := darrayBlock(gsizes[i], distribs[i], dargs[i], psizes[i])
		if err != nil {
			return nil, fmt.Errorf("ddt: %s: dimension %d: %w", what, i, err)
		}
		blks[i] = b
	}
	coords := make([]int, n) // row-major: the last dimension fastest
	for i, r := n-1, rank; i >= 0; i-- {
		coords[i], r = r%psizes[i], r/psizes[i]
	}

	// From the fastest dimension outwards: select this process's indices
	// of the dimension among copies of the inner type, whose extent is
	// one step of the dimension, then widen the extent to the whole
	// dimension (lb 0) for the next one.
	cur := old
	var sel *Type
	for k := range n {
		d := n - 1 - k
		if order == OrderFortran {
			d = k
		}
		ext, ok := checked.Mul(cur.Extent(), int64(gsizes[d]))
		if !ok {
			return nil, fmt.Errorf("ddt: %s: array size: %w", what, ErrOverflow)
		}
		var err error
		if sel, err = darraySelect(gsizes[d], distribs[d], blks[d], psizes[d], coords[d], cur); err != nil {
			return nil, fmt.Errorf("ddt: %s: dimension %d: %w", what, d, err)
		}
		if cur, err = Resized(sel, 0, ext); err != nil {
			return nil, fmt.Errorf("ddt: %s: %w", what, err)
		}
	}
	ints := make([]int, 0, 4+4*n)
	ints = append(ints, size, rank, n)
	ints = append(ints, gsizes...)
	for _, d := range distribs {
		ints = append(ints, int(d))
	}
	ints = append(append(append(ints, dargs...), psizes...), int(order))
	cur.comb, cur.ints, cur.addrs, cur.types = CombinerDarray, ints, nil, []*Type{old}
	cur.impl = sel
	return cur, nil
}

// darrayBlock is the block size of one dimension: the indices dealt out
// at a time.
func darrayBlock(g int, dist Distribution, darg, p int) (int, error) {
	if darg != DistributeDefaultArg && darg <= 0 {
		return 0, fmt.Errorf("darg %d: %w", darg, ErrInvalid)
	}
	switch dist {
	case DistributeNone:
		if p != 1 {
			return 0, fmt.Errorf("not distributed over %d processes: %w", p, ErrInvalid)
		}
		return g, nil
	case DistributeBlock:
		if darg == DistributeDefaultArg {
			return (g + p - 1) / p, nil
		}
		if covered, ok := checked.Mul(int64(darg), int64(p)); ok && covered < int64(g) {
			return 0, fmt.Errorf("%d blocks of %d cannot cover %d indices: %w", p, darg, g, ErrInvalid)
		}
		return darg, nil
	case DistributeCyclic:
		if darg == DistributeDefaultArg {
			return 1, nil
		}
		return darg, nil
	}
	return 0, fmt.Errorf("distribution %d: %w", dist, ErrInvalid)
}

// darraySelect is the indices of one dimension of g that the process at
// coordinate c of p owns, in blocks of blk dealt out in turn (one block
// each for a block distribution), as copies of inner: whole cycles as a
// vector, a shorter last block apart.
func darraySelect(g int, dist Distribution, blk, p, c int, inner *Type) (*Type, error) {
	first, ok := checked.Mul(int64(c), int64(blk))
	if !ok || first >= int64(g) { // nothing of this dimension here
		return Indexed(nil, nil, inner)
	}
	if dist != DistributeCyclic {
		return Indexed([]int{min(blk, g-int(first))}, []int{int(first)}, inner)
	}
	// This process's blocks start at first, first+cycle, ... below g;
	// the last may be cut short by the end of the dimension.
	nb, cycle := int64(1), int64(blk)
	if c64, ok := checked.Mul(int64(blk), int64(p)); ok {
		cycle = c64
		nb = (int64(g)-first-1)/cycle + 1
	}
	lastStart := first + (nb-1)*cycle
	full, last := int(nb), 0
	if rest := int64(g) - lastStart; rest < int64(blk) {
		full, last = int(nb-1), int(rest)
	}
	vec, err := Vector(full, blk, int(cycle), inner)
	if err != nil {
		return nil, err
	}
	step := inner.Extent()
	if last == 0 {
		return HIndexedBlock(1, []int64{first * step}, vec)
	}
	tail, err := Contiguous(last, inner)
	if err != nil {
		return nil, err
	}
	return Struct([]int{1, 1}, []int64{first * step, lastStart * step}, []*Type{vec, tail})
}
