package endpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// maxDimsNodes bounds DimsCreate's nnodes: MPI counts processes in a C int,
// and factorising up to it by trial division is quick.
const maxDimsNodes = math.MaxInt32

// DimsCreate returns a grid shape for nnodes processes, as MPI_Dims_create
// does: a copy of dims whose zero entries are replaced by factors of nnodes
// divided by the product of the non-zero entries, which are kept as given.
// The filled entries appear in non-increasing order and are as close to
// each other as possible: their largest and smallest differ least; among
// such shapes, the one with the larger largest entry wins; remaining ties go
// to the second largest and second smallest entries, and so on inwards (the
// choices MPICH makes). DimsCreate(6, []int{0, 0}) is [3 2];
// DimsCreate(12, []int{0, 3, 0}) is [2 3 2].
//
// The error wraps ErrInvalid when nnodes is below 1 or above math.MaxInt32
// (MPI counts processes in a C int), an entry of dims is negative, or
// nnodes is not a multiple of the product of the non-zero entries (with no
// zero entry: not their product). An empty dims describes one process.
func DimsCreate(nnodes int, dims []int) ([]int, error) {
	if nnodes < 1 || nnodes > maxDimsNodes {
		return nil, fmt.Errorf("endpoint: DimsCreate of %d nodes, want 1..%d: %w", nnodes, maxDimsNodes, ErrInvalid)
	}
	rest, free := nnodes, 0
	for i, d := range dims {
		switch {
		case d < 0:
			return nil, fmt.Errorf("endpoint: DimsCreate: dims[%d] = %d is negative: %w", i, d, ErrInvalid)
		case d == 0:
			free++
		case rest%d != 0:
			return nil, fmt.Errorf("endpoint: DimsCreate: %d nodes are not a multiple of the fixed dimensions %v: %w", nnodes, dims, ErrInvalid)
		default:
			rest /= d
		}
	}
	out := slices.Clone(dims)
	if free == 0 {
		if rest != 1 {
			return nil, fmt.Errorf("endpoint: DimsCreate: the fixed dimensions %v hold %d nodes, not %d: %w", dims, nnodes/rest, nnodes, ErrInvalid)
		}
		return out, nil
	}
	f := balanced(rest, free)
	for i := range out {
		if out[i] == 0 {
			out[i], f = f[0], f[1:]
		}
	}
	return out, nil
}

// balanced returns k factors of m (1 <= m <= maxDimsNodes), non-increasing,
// as close to each other as possible: the first and last differ least;
// among those, the first is largest; then the same for the second and the
// last but one, and so on inwards. (MPICH 4.0.2's MPI_Dims_create gives
// the same shapes for every m up to 20000 and k up to 6, compared when this
// was written; TestDimsCreateMPICH keeps comparing a smaller range.) It is a
// depth-first search over the divisors of m, increasing at each position,
// that drops a prefix as soon as its first and last factors must differ
// more than the best shape's.
func balanced(m, k int) []int {
	s := &dimSearch{divs: divisors(m), k: k, cur: make([]int, k), spread: -1}
	s.walk(0, m, m)
	return s.best
}

type dimSearch struct {
	divs   []int // of the original m, ascending: every factor is one
	k      int
	cur    []int
	best   []int
	spread int // best[0]-best[k-1], -1 before the first
}

// walk fills cur[i:] with factors of m, none above limit.
func (s *dimSearch) walk(i, m, limit int) {
	left := s.k - i
	if left == 1 {
		if m > limit {
			return
		}
		s.cur[i] = m
		if s.best == nil || closer(s.cur, s.best) {
			s.best = slices.Clone(s.cur)
			s.spread = s.cur[0] - m
		}
		return
	}
	for _, d := range s.divs {
		if d > limit {
			break
		}
		if m%d != 0 || powBelow(d, left, m) {
			continue // cur[i] is the largest of left factors of m: d^left >= m
		}
		first := d
		if i > 0 {
			first = s.cur[0]
		}
		// The last factor is at most the (left-1)th root of what remains,
		// and larger d only lowers that root.
		if s.spread >= 0 && first-iroot(m/d, left-1) > s.spread {
			break
		}
		s.cur[i] = d
		s.walk(i+1, m/d, d)
	}
}

// closer reports whether the non-increasing shape a is closer to even than
// b (same length): comparing the outermost pair first, a smaller difference
// wins, then a larger first entry of the pair; equal pairs pass the
// question on to the next pair inwards.
func closer(a, b []int) bool {
	for i, j := 0, len(a)-1; i <= j; i, j = i+1, j-1 {
		if da, db := a[i]-a[j], b[i]-b[j]; da != db {
			return da < db
		}
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// divisors returns the divisors of m >= 1 in increasing order.
func divisors(m int) []int {
	var lo, hi []int
	for d := 1; d*d <= m; d++ {
		if m%d == 0 {
			lo = append(lo, d)
			if d*d != m {
				hi = append(hi, m/d)
			}
		}
	}
	slices.Reverse(hi)
	return append(lo, hi...)
}

// powBelow reports whether d^n < m, for d, n, m >= 1, without overflow.
func powBelow(d, n, m int) bool {
	if d == 1 {
		return m > 1
	}
	p := 1 // at most 31 doublings below m
	for range n {
		if p > (m-1)/d {
			return false // p*d >= m
		}
		p *= d
	}
	return p < m
}

// iroot returns the largest r >= 1 with r^n <= m, for m, n >= 1.
func iroot(m, n int) int {
	if n == 1 {
		return m
	}
	r := int(math.Pow(float64(m), 1/float64(n)))
	for r > 1 && !powBelow(r, n, m+1) {
		r-- // r^n > m
	}
	for powBelow(r+1, n, m+1) {
		r++ // (r+1)^n <= m
	}
	return max(r, 1)
}

// Cart is a communicator with a Cartesian process grid, as MPI_Cart_create
// makes: rank r of Comm sits at the coordinates Coords(r), in row-major
// order (the last dimension varies fastest). Point-to-point and collective
// operations go through Comm; Coords, Rank and Shift translate between
// ranks and grid positions. A Cart is used like the Comm it holds (one
// goroutine at a time for a private endpoint's communicator).
//
// Cart holds its communicator rather than embedding it: Rank here maps
// coordinates to a rank (MPI_Cart_rank), while Comm().Rank() is the
// calling handle's own rank.
type Cart struct {
	comm    *Comm
	dims    []int
	periods []bool
	strides []int // rank = Σ coords[i]*strides[i]
}

// CartCreate builds a Cartesian grid of the given dimensions over c
// (MPI_Cart_create without reorder: ranks keep their order, so rank r of c
// is rank r of the grid). Ranks 0..N-1 of c, N the product of dims, form the
// grid; the others get a nil Cart and a nil error (MPI_COMM_NULL). periods
// says which dimensions wrap around; nil means none, otherwise it has one
// entry per dimension. The grid gets a communicator of its own (a Dup or
// Split of c), so its messages never match receives on c.
//
// CartCreate is collective over c, and every rank must pass the same dims
// and periods: the ranks compare them first, and all return an error
// wrapping ErrInvalid when any rank's are different or invalid (an entry
// below 1, periods of the wrong length, more grid points than ranks).
// A Cart of no dimensions holds rank 0 alone.
func (c *Comm) CartCreate(ctx context.Context, dims []int, periods []bool) (*Cart, error) {
	if err := c.usable("cart create"); err != nil {
		return nil, err
	}
	if err := c.intra("cart create"); err != nil {
		return nil, err
	}
	// Agree on the arguments before deriving the communicator: a rank
	// with different (or bad) arguments would otherwise leave the others
	// waiting in the split.
	if err := agree(ctx, c, "cart create", encodeGrid(dims, periods)); err != nil {
		return nil, err
	}
	n, err := gridSize(dims, periods, c.size)
	if err != nil {
		return nil, err
	}
	var gc *Comm
	switch {
	case n == c.size:
		gc, err = c.Dup(ctx)
	case c.rank < n:
		gc, err = c.Split(ctx, 0, c.rank)
	default:
		_, err = c.Split(ctx, Undefined, 0)
	}
	if err != nil || gc == nil {
		return nil, err
	}
	return newCart(gc, dims, periods), nil
}

// agree returns nil when every rank of c passed the same args (an
// encoding), and on every rank the same error wrapping ErrInvalid when not.
// Collective over c.
func agree(ctx context.Context, c *Comm, op string, args []byte) error {
	all, err := c.Allgather(ctx, args)
	if err != nil {
		return fmt.Errorf("endpoint: %s: compare arguments: %w", op, err)
	}
	var odd []int
	for r, b := range all {
		if string(b) != string(all[0]) {
			odd = append(odd, r)
		}
	}
	if odd != nil {
		return fmt.Errorf("endpoint: %s: ranks %v passed other arguments than rank 0 (every rank must pass the same): %w", op, odd, ErrInvalid)
	}
	return nil
}

// encodeGrid writes dims and periods the same way on every rank; nil
// periods read as none periodic.
func encodeGrid(dims []int, periods []bool) []byte {
	if periods == nil {
		periods = make([]bool, len(dims))
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(dims)))
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint64(b, uint64(int64(d)))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(periods)))
	for _, p := range periods {
		if p {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

// gridSize checks dims and periods for a grid over size ranks and returns
// its number of points.
func gridSize(dims []int, periods []bool, size int) (int, error) {
	if periods != nil && len(periods) != len(dims) {
		return 0, fmt.Errorf("endpoint: cart: %d periods for %d dimensions: %w", len(periods), len(dims), ErrInvalid)
	}
	n := 1
	for i, d := range dims {
		if d < 1 {
			return 0, fmt.Errorf("endpoint: cart: dimension %d has extent %d, want >= 1: %w", i, d, ErrInvalid)
		}
		if n > size/d {
			return 0, fmt.Errorf("endpoint: cart: grid %v holds more points than the %d ranks: %w", dims, size, ErrInvalid)
		}
		n *= d
	}
	return n, nil
}

func newCart(c *Comm, dims []int, periods []bool) *Cart {
	g := &Cart{comm: c, dims: slices.Clone(dims), periods: make([]bool, len(dims)), strides: make([]int, len(dims))}
	copy(g.periods, periods)
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		g.strides[i] = s
		s *= dims[i]
	}
	return g
}

// Comm returns the grid's communicator: its ranks are the grid's, in
// row-major order. Send, receive and run collectives on it; Cart.Free
// frees it. Nil for a nil Cart.
func (g *Cart) Comm() *Comm {
	if g == nil {
		return nil
	}
	return g.comm
}

// Dims returns the extent of each dimension (a copy; nil for a nil Cart).
func (g *Cart) Dims() []int {
	if g == nil {
		return nil
	}
	return slices.Clone(g.dims)
}

// Periods returns which dimensions wrap around (a copy, one entry per
// dimension; nil for a nil Cart).
func (g *Cart) Periods() []bool {
	if g == nil {
		return nil
	}
	return slices.Clone(g.periods)
}

func (g *Cart) usable(op string) error {
	if g == nil {
		return fmt.Errorf("endpoint: %s on a nil Cart: %w", op, ErrInvalid)
	}
	return g.comm.usable(op)
}

// Coords returns the grid coordinates of rank (MPI_Cart_coords). The error
// wraps ErrInvalid for a rank outside the grid, ErrClosed after Free.
func (g *Cart) Coords(rank int) ([]int, error) {
	if err := g.usable("cart coords"); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= g.comm.size {
		return nil, fmt.Errorf("endpoint: cart coords of rank %d, grid ranks are 0..%d: %w", rank, g.comm.size-1, ErrInvalid)
	}
	out := make([]int, len(g.dims))
	for i, s := range g.strides {
		out[i] = rank / s % g.dims[i]
	}
	return out, nil
}

// Rank returns the rank at coords (MPI_Cart_rank), one coordinate per
// dimension. A coordinate outside 0..extent-1 of a periodic dimension wraps
// around; in a non-periodic one it is an error wrapping ErrInvalid.
func (g *Cart) Rank(coords []int) (int, error) {
	if err := g.usable("cart rank"); err != nil {
		return 0, err
	}
	if len(coords) != len(g.dims) {
		return 0, fmt.Errorf("endpoint: cart rank: %d coordinates for %d dimensions: %w", len(coords), len(g.dims), ErrInvalid)
	}
	r := 0
	for i, x := range coords {
		x, ok := g.wrap(i, x)
		if !ok {
			return 0, fmt.Errorf("endpoint: cart rank: coordinate %d of %v outside 0..%d of a non-periodic dimension: %w", i, coords, g.dims[i]-1, ErrInvalid)
		}
		r += x * g.strides[i]
	}
	return r, nil
}

// wrap maps coordinate x of dimension i into the grid, or reports that it
// falls off a non-periodic border.
func (g *Cart) wrap(i, x int) (int, bool) {
	d := g.dims[i]
	if x >= 0 && x < d {
		return x, true
	}
	if !g.periods[i] {
		return 0, false
	}
	return (x%d + d) % d, true
}

// Shift returns the neighbours of this rank disp steps along dimension dim
// (MPI_Cart_shift): dest is the rank disp steps ahead, source the rank disp
// steps behind, so that sending to dest while receiving from source moves
// data forward along the dimension. At the border of a non-periodic
// dimension the missing neighbour is ProcNull. The error wraps ErrInvalid
// for a dimension out of range.
func (g *Cart) Shift(dim, disp int) (source, dest int, err error) {
	if err := g.usable("cart shift"); err != nil {
		return ProcNull, ProcNull, err
	}
	if dim < 0 || dim >= len(g.dims) {
		return ProcNull, ProcNull, fmt.Errorf("endpoint: cart shift along dimension %d of %d: %w", dim, len(g.dims), ErrInvalid)
	}
	me := g.comm.rank
	extent, stride := g.dims[dim], g.strides[dim]
	if !g.periods[dim] && (disp >= extent || disp <= -extent) {
		return ProcNull, ProcNull, nil // off the grid both ways
	}
	d := disp % extent // |d| < extent: x±d cannot overflow
	x := me / stride % extent
	at := func(y int) int {
		if y, ok := g.wrap(dim, y); ok {
			return me + (y-x)*stride
		}
		return ProcNull
	}
	return at(x - d), at(x + d), nil
}

// Sub returns the sub-grid of the dimensions where remain is true, holding
// this rank (MPI_Cart_sub): ranks that differ only in the kept coordinates
// form a new Cart, with the kept dimensions in their order, their extents
// and periods, and ranks in row-major order of the kept coordinates.
// Keeping no dimension gives each rank a Cart of its own. Collective over
// the grid's communicator; remain has one entry per dimension, else the
// error wraps ErrInvalid.
func (g *Cart) Sub(ctx context.Context, remain []bool) (*Cart, error) {
	if err := g.usable("cart sub"); err != nil {
		return nil, err
	}
	// Agree on remain first, as CartCreate does on its arguments: a rank
	// with different flags would otherwise wait in the split alone.
	if err := agree(ctx, g.comm, "cart sub", encodeGrid(nil, remain)); err != nil {
		return nil, err
	}
	if len(remain) != len(g.dims) {
		return nil, fmt.Errorf("endpoint: cart sub: %d flags for %d dimensions: %w", len(remain), len(g.dims), ErrInvalid)
	}
	me, _ := g.Coords(g.comm.rank)
	color, key := 0, 0
	var dims []int
	var periods []bool
	for i, x := range me {
		if remain[i] {
			key = key*g.dims[i] + x
			dims = append(dims, g.dims[i])
			periods = append(periods, g.periods[i])
		} else {
			color = color*g.dims[i] + x
		}
	}
	c, err := g.comm.Split(ctx, color, key)
	if err != nil {
		return nil, fmt.Errorf("endpoint: cart sub: %w", err)
	}
	return newCart(c, dims, periods), nil
}

// Free frees the grid's communicator (Comm.Free). Freeing a nil Cart does
// nothing.
func (g *Cart) Free() error {
	if g == nil {
		return nil
	}
	return g.comm.Free()
}
