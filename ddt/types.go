package ddt

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/checked"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// Combiner names the constructor that made a type (MPI_COMBINER_*).
type Combiner uint8

// Combiners.
const (
	CombinerNamed Combiner = iota + 1
	CombinerContiguous
	CombinerVector
	CombinerHVector
	CombinerIndexed
	CombinerHIndexed
	CombinerIndexedBlock
	CombinerHIndexedBlock
	CombinerStruct
	CombinerSubarray
	CombinerResized
	CombinerDup
	CombinerDarray
)

var combinerNames = [...]string{"invalid", "named", "contiguous", "vector", "hvector", "indexed",
	"hindexed", "indexed_block", "hindexed_block", "struct", "subarray", "resized", "dup", "darray"}

// String returns the MPI-style name of the combiner, e.g. "hvector".
func (c Combiner) String() string {
	if int(c) < len(combinerNames) {
		return combinerNames[c]
	}
	return fmt.Sprintf("combiner(%d)", int(c))
}

// Order is the storage order of a Subarray or a Darray.
type Order uint8

const (
	// OrderC is row-major order: the last dimension varies fastest.
	OrderC Order = iota
	// OrderFortran is column-major order: the first dimension varies fastest.
	OrderFortran
)

// Type is a datatype: a predefined element type or a derived type built by
// one of the constructors. Derived types must be committed (Commit) before
// Pack/Unpack. A committed Type is immutable and safe for concurrent use.
type Type struct {
	comb  Combiner
	name  string // predefined types
	ints  []int
	addrs []int64
	types []*Type
	impl  *Type // the equivalent type whose IR this one uses (Subarray)

	size           int64
	lb, ub         int64
	trueLB, trueUB int64 // trueUB exclusive; both 0 when size == 0
	stickyLB       bool  // lb set explicitly (Resized) and propagating
	stickyUB       bool
	align          int64 // strictest alignment of the predefined elements (for struct padding)
	elem           int64 // predefined element size when homogeneous, 0 when empty, -1 when mixed

	mu     sync.Mutex // serialises Commit and SetJIT
	jit    JITMode
	jitSet bool
	st     atomic.Pointer[state] // set once by Commit

	sigCache atomic.Pointer[sig] // signature of one instance (signature.go)
	sigLast  sigMemo             // the last message signature computed (signature.go)
}

// state is what Commit produced; read lock-free on the Pack/Unpack path.
type state struct {
	ir     *ddtir.IR
	kernel ddtir.Kernel
	blocks int64 // blocks one instance visits (Blocks), saturated
}

// newState is the state of a committed type with IR ir and kernel k.
func newState(ir *ddtir.IR, k ddtir.Kernel) *state {
	s := &state{ir: ir, kernel: k}
	if ir.Root != nil {
		s.blocks = nodeBlocks(ir.Root)
	}
	return s
}

// Contents is the constructor call that made a type, as MPI_Type_get_contents
// returns it: the integer arguments, the address-sized (byte) arguments and the
// component types, in the order MPI defines for the combiner.
type Contents struct {
	Combiner Combiner
	Ints     []int
	Addrs    []int64
	Types    []*Type
}

func predefined(name string, size, align int64) *Type {
	t := &Type{comb: CombinerNamed, name: name, size: size, ub: size, trueUB: size, align: align, elem: size}
	t.st.Store(newState(t.buildIR(), nil))
	return t
}

// Predefined element types. They are committed.
var (
	Byte       = predefined("byte", 1, 1)
	Bool       = predefined("bool", 1, 1)
	Int8       = predefined("int8", 1, 1)
	Int16      = predefined("int16", 2, 2)
	Int32      = predefined("int32", 4, 4)
	Int64      = predefined("int64", 8, 8)
	Uint8      = predefined("uint8", 1, 1)
	Uint16     = predefined("uint16", 2, 2)
	Uint32     = predefined("uint32", 4, 4)
	Uint64     = predefined("uint64", 8, 8)
	Float32    = predefined("float32", 4, 4)
	Float64    = predefined("float64", 8, 8)
	Complex64  = predefined("complex64", 8, 4)
	Complex128 = predefined("complex128", 16, 8)
)

// Name returns the name of a predefined type, or the combiner name of a
// derived one ("<nil>" for a nil *Type).
func (t *Type) Name() string {
	switch {
	case t == nil:
		return "<nil>"
	case t.comb == CombinerNamed:
		return t.name
	}
	return t.comb.String()
}

// String describes the type briefly: its name, size and extent ("<nil>" for
// a nil *Type).
func (t *Type) String() string {
	if t == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s(size=%d extent=%d)", t.Name(), t.size, t.ub-t.lb)
}

// The getters below return 0 (or an empty value) for a nil *Type.

// Size returns the number of data bytes in one element (MPI_Type_size).
func (t *Type) Size() int64 {
	if t == nil {
		return 0
	}
	return t.size
}

// Extent returns ub - lb (MPI_Type_get_extent). Constructors guarantee that
// it fits in an int64 and is not math.MinInt64.
func (t *Type) Extent() int64 {
	if t == nil {
		return 0
	}
	return t.ub - t.lb
}

// LB returns the lower bound.
func (t *Type) LB() int64 {
	if t == nil {
		return 0
	}
	return t.lb
}

// UB returns the upper bound.
func (t *Type) UB() int64 {
	if t == nil {
		return 0
	}
	return t.ub
}

// TrueLB returns the lowest displacement of a byte the type touches
// (MPI_Type_get_true_extent); 0 for an empty type.
func (t *Type) TrueLB() int64 {
	if t == nil {
		return 0
	}
	return t.trueLB
}

// TrueExtent returns the span of the bytes the type touches.
func (t *Type) TrueExtent() int64 {
	if t == nil {
		return 0
	}
	return t.trueUB - t.trueLB
}

// CheckBounds reports whether count elements of the type, element k at
// displacement k·Extent() from buf[0], touch only bytes of a buffer of n
// bytes: nil, or an error wrapping ErrBounds that names the bytes they
// span (and ErrOverflow where that span does not fit an int64). A count
// of 0 touches nothing.
func (t *Type) CheckBounds(count int, n int) error {
	if t == nil {
		return fmt.Errorf("ddt: bounds of a nil type: %w", ErrInvalid)
	}
	if count <= 0 || t.TrueExtent() == 0 {
		return nil
	}
	last, ok1 := checked.Mul(int64(count-1), t.Extent())
	lo, ok2 := checked.Add(t.TrueLB(), min(last, 0))
	hi, ok3 := checked.Add(t.TrueLB(), t.TrueExtent())
	hi, ok4 := checked.Add(hi, max(last, 0))
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return fmt.Errorf("ddt: %d elements of %s span more bytes than an int64 counts: %w: %w", count, t.Name(), ErrBounds, ErrOverflow)
	}
	if lo < 0 || hi > int64(n) {
		return fmt.Errorf("ddt: %d elements of %s span bytes [%d, %d) of a %d-byte buffer: %w", count, t.Name(), lo, hi, n, ErrBounds)
	}
	return nil
}

// Combiner returns the constructor that made the type (0 for a nil *Type).
func (t *Type) Combiner() Combiner {
	if t == nil {
		return 0
	}
	return t.comb
}

// Envelope returns the numbers of integer, address and type arguments of the
// constructor and the combiner (MPI_Type_get_envelope).
func (t *Type) Envelope() (nInts, nAddrs, nTypes int, c Combiner) {
	if t == nil {
		return 0, 0, 0, 0
	}
	return len(t.ints), len(t.addrs), len(t.types), t.comb
}

// Contents returns copies of the constructor's arguments
// (MPI_Type_get_contents). Predefined types have empty contents.
func (t *Type) Contents() Contents {
	if t == nil {
		return Contents{}
	}
	return Contents{
		Combiner: t.comb,
		Ints:     append([]int(nil), t.ints...),
		Addrs:    append([]int64(nil), t.addrs...),
		Types:    append([]*Type(nil), t.types...),
	}
}

// calc accumulates bounds while a constructor lists its component copies.
type calc struct {
	err            error
	what           string
	size           int64
	any            bool // some non-empty copy seen
	lb, ub         int64
	trueLB, trueUB int64
	stickyLB       bool
	stickyUB       bool
	slb, sub       int64 // sticky bounds
	anyBound       bool  // some copy (even empty-size) seen
	align          int64
	elem           int64
}

func (c *calc) fail(format string, a ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("ddt: %s: %s: %w", c.what, fmt.Sprintf(format, a...), ErrInvalid)
	}
}

func (c *calc) overflow(detail string) {
	if c.err == nil {
		c.err = fmt.Errorf("ddt: %s: %s: %w", c.what, detail, ErrOverflow)
	}
}

// add records n copies of child with origins d0 + i*stride, i in [0, n).
func (c *calc) add(child *Type, n, d0, stride int64) {
	if c.err != nil || n == 0 {
		return
	}
	span, ok := checked.Mul(n-1, stride)
	if !ok {
		c.overflow("displacement span")
		return
	}
	dmin, dmax := d0, d0
	if span < 0 {
		dmin, ok = checked.Add(d0, span)
	} else {
		dmax, ok = checked.Add(d0, span)
	}
	if !ok {
		c.overflow("displacement")
		return
	}
	sz, ok := checked.Mul(n, child.size)
	if !ok {
		c.overflow("size")
		return
	}
	if c.size, ok = checked.Add(c.size, sz); !ok {
		c.overflow("size")
		return
	}
	lo1, ok1 := checked.Add(dmin, child.lb)
	hi1, ok2 := checked.Add(dmax, child.ub)
	lo2, ok3 := checked.Add(dmax, child.lb)
	hi2, ok4 := checked.Add(dmin, child.ub)
	if !(ok1 && ok2 && ok3 && ok4) {
		c.overflow("bounds")
		return
	}
	lo, hi := min(lo1, lo2), max(hi1, hi2)
	if child.stickyLB {
		if !c.stickyLB || lo < c.slb {
			c.slb = lo
		}
		c.stickyLB = true
	}
	if child.stickyUB {
		if !c.stickyUB || hi > c.sub {
			c.sub = hi
		}
		c.stickyUB = true
	}
	if !c.anyBound || lo < c.lb {
		c.lb = lo
	}
	if !c.anyBound || hi > c.ub {
		c.ub = hi
	}
	c.anyBound = true
	if child.size > 0 {
		tlo, ok1 := checked.Add(dmin, child.trueLB)
		thi, ok2 := checked.Add(dmax, child.trueUB)
		if !(ok1 && ok2) {
			c.overflow("true bounds")
			return
		}
		if !c.any || tlo < c.trueLB {
			c.trueLB = tlo
		}
		if !c.any || thi > c.trueUB {
			c.trueUB = thi
		}
		c.any = true
		switch {
		case c.elem == 0:
			c.elem = child.elem
		case c.elem != child.elem:
			c.elem = -1
		}
	}
	c.align = max(c.align, child.align)
}

func (c *calc) finish(t *Type, pad bool) (*Type, error) {
	if c.err != nil {
		return nil, c.err
	}
	t.size = c.size
	if c.anyBound {
		t.lb, t.ub = c.lb, c.ub
	}
	if c.stickyLB {
		t.lb, t.stickyLB = c.slb, true
	}
	if c.stickyUB {
		t.ub, t.stickyUB = c.sub, true
	}
	if pad && !t.stickyUB && c.align > 1 {
		// MPI's epsilon: round the extent of a struct up to the strictest
		// alignment of its elements, as C does for a struct.
		ext := t.ub - t.lb
		if r := ext % c.align; r != 0 {
			var ok bool
			if t.ub, ok = checked.Add(t.ub, c.align-r); !ok {
				return nil, fmt.Errorf("ddt: %s: padded upper bound: %w", c.what, ErrOverflow)
			}
		}
	}
	if c.any {
		t.trueLB, t.trueUB = c.trueLB, c.trueUB
	}
	if err := checkBounds(c.what, t); err != nil {
		return nil, err
	}
	t.align = max(c.align, 1)
	t.elem = c.elem
	return t, nil
}

// checkBounds verifies the invariants every constructor guarantees: the
// extent ub-lb and the true extent fit in an int64 (the extent is not
// math.MinInt64, so it can be negated), and the size is not negative.
func checkBounds(what string, t *Type) error {
	ext, ok := checked.Sub(t.ub, t.lb)
	if !ok || ext == math.MinInt64 {
		return fmt.Errorf("ddt: %s: extent of bounds [%d,%d): %w", what, t.lb, t.ub, ErrOverflow)
	}
	if _, ok := checked.Sub(t.trueUB, t.trueLB); !ok {
		return fmt.Errorf("ddt: %s: true extent of [%d,%d): %w", what, t.trueLB, t.trueUB, ErrOverflow)
	}
	if t.size < 0 {
		return fmt.Errorf("ddt: %s: size %d: %w", what, t.size, ErrOverflow)
	}
	return nil
}

func checkType(what string, t *Type) error {
	if t == nil {
		return fmt.Errorf("ddt: %s: nil type: %w", what, ErrInvalid)
	}
	return nil
}

// ---------------------------------------------------------------------------
// constructors

// Contiguous returns count copies of old laid end to end by old's extent
// (MPI_Type_contiguous).
func Contiguous(count int, old *Type) (*Type, error) {
	c := calc{what: "Contiguous"}
	if err := checkType(c.what, old); err != nil {
		return nil, err
	}
	if count < 0 {
		c.fail("negative count %d", count)
	}
	c.add(old, int64(count), 0, old.Extent())
	return c.finish(&Type{comb: CombinerContiguous, ints: []int{count}, types: []*Type{old}}, false)
}

// Vector returns count blocks of blocklen copies of old, the blocks stride
// extents of old apart (MPI_Type_vector). stride may be negative.
func Vector(count, blocklen, stride int, old *Type) (*Type, error) {
	c := calc{what: "Vector"}
	if err := checkType(c.what, old); err != nil {
		return nil, err
	}
	bs, ok := checked.Mul(int64(stride), old.Extent())
	if !ok {
		return nil, fmt.Errorf("ddt: Vector: stride %d × extent %d: %w", stride, old.Extent(), ErrOverflow)
	}
	t, err := hvector(&c, count, blocklen, bs, old)
	if err != nil {
		return nil, err
	}
	t.comb, t.ints, t.addrs = CombinerVector, []int{count, blocklen, stride}, nil
	return t, nil
}

// HVector is Vector with the stride in bytes (MPI_Type_create_hvector).
func HVector(count, blocklen int, stride int64, old *Type) (*Type, error) {
	c := calc{what: "HVector"}
	if err := checkType(c.what, old); err != nil {
		return nil, err
	}
	return hvector(&c, count, blocklen, stride, old)
}

func hvector(c *calc, count, blocklen int, stride int64, old *Type) (*Type, error) {
	if count < 0 {
		c.fail("negative count %d", count)
	}
	if blocklen < 0 {
		c.fail("negative blocklength %d", blocklen)
	}
	if count > 0 && blocklen > 0 {
		// Block column j (0 ≤ j < blocklen) is a loop over the count blocks;
		// the first and last columns bound the others, and the size counts all.
		c.add(old, int64(count), 0, stride)
		if blocklen > 1 {
			d, ok := checked.Mul(int64(blocklen-1), old.Extent())
			if !ok {
				c.overflow("block displacement")
			}
			c.add(old, int64(count), d, stride)
		}
		if c.err == nil && blocklen > 2 {
			sz, ok := checked.Mul(int64(count), int64(blocklen-2))
			if ok {
				sz, ok = checked.Mul(sz, old.size)
			}
			if ok {
				c.size, ok = checked.Add(c.size, sz)
			}
			if !ok {
				c.overflow("size")
			}
		}
	}
	t := &Type{comb: CombinerHVector, ints: []int{count, blocklen}, addrs: []int64{stride}, types: []*Type{old}}
	return c.finish(t, false)
}

func indexedCalc(c *calc, blocklens []int, disps []int64, old *Type) {
	if len(blocklens) != len(disps) {
		c.fail("%d blocklengths but %d displacements", len(blocklens), len(disps))
		return
	}
	for i, bl := range blocklens {
		if bl < 0 {
			c.fail("negative blocklength %d at %d", bl, i)
			return
		}
		if bl > 0 {
			c.add(old, int64(bl), disps[i], old.Extent())
		}
	}
}

func scaleDisps(c *calc, disps []int, ext int64) []int64 {
	out := make([]int64, len(disps))
	for i, d := range disps {
		v, ok := checked.Mul(int64(d), ext)
		if !ok {
			c.overflow(fmt.Sprintf("displacement %d × extent %d", d, ext))
			return out
		}
		out[i] = v
	}
	return out
}

// Indexed returns, for each i, blocklens[i] copies of old at displacement
// disps[i] × extent(old) (MPI_Type_indexed).
func Indexed(blocklens, disps []int, old *Type) (*Type, error) {
	c := calc{what: "Indexed"}
	if err := checkType(c.what, old); err != nil {
		return nil, err
	}
	bd := scaleDisps(&c, disps, old.Extent())
	indexedCalc(&c, blocklens, bd, old)
	ints := make([]int, 0, 1+2*len(blocklens))
	ints = append(append(append(ints, len(blocklens)), blocklens...), disps...)
	return c.finish(&Type{comb: CombinerIndexed, ints: ints, types: []*Type{old}}, false)
}

// HIndexed is Indexed with byte displacements (MPI_Type_create_hindexed).
func HIndexed(blocklens []int, disps []int64, old *Type) (*Type, error) {
	c := calc{what: "HIndexed"}
	if err := checkType(c.what, old); err != nil {
		return nil, err
	}
	indexedCalc(&c, blocklens, disps, old)
	ints := append([]int{len(blocklens)}, blocklens...)
	return c.finish(&Type{comb: CombinerHIndexed, ints: ints, addrs: append([]int64(nil), disps...), types: []*Type{old}}, false)
}

// IndexedBlock is Indexed with one blocklength for all blocks
// (MPI_Type_create_indexed_block).
func IndexedBlock(blocklen int, disps []int, old *Type) (*Type, error) {
	c := calc{what: "IndexedBlock"}
	if err := checkType(c.what, old); err != nil {
		return nil, err
	}
	bd := scaleDisps(&c, disps, old.Extent())
	bls := make([]int, len(disps))
	for i := range bls {
		bls[i] = blocklen
	}
	indexedCalc(&c, bls, bd, old)
	ints := append([]int{len(disps), blocklen}, disps...)
	return c.finish(&Type{comb: CombinerIndexedBlock, ints: ints, types: []*Type{old}}, false)
}

// HIndexedBlock is IndexedBlock with byte displacements
// (MPI_Type_create_hindexed_block).
func HIndexedBlock(blocklen int, disps []int64, old *Type) (*Type, error) {
	c := calc{what: "HIndexedBlock"}
	if err := checkType(c.what, old); err != nil {
		return nil, err
	}
	bls := make([]int, len(disps))
	for i := range bls {
		bls[i] = blocklen
	}
	indexedCalc(&c, bls, disps, old)
	return c.finish(&Type{comb: CombinerHIndexedBlock, ints: []int{len(disps), blocklen},
		addrs: append([]int64(nil), disps...), types: []*Type{old}}, false)
}

// Struct returns, for each i, blocklens[i] copies of types[i] at byte
// displacement disps[i] (MPI_Type_create_struct). Unless a component has an
// explicit upper bound (Resized), the extent is rounded up to the strictest
// alignment of the predefined elements, as MPI's epsilon does.
func Struct(blocklens []int, disps []int64, types []*Type) (*Type, error) {
	c := calc{what: "Struct"}
	if len(blocklens) != len(disps) || len(disps) != len(types) {
		return nil, fmt.Errorf("ddt: Struct: %d blocklengths, %d displacements, %d types: %w",
			len(blocklens), len(disps), len(types), ErrInvalid)
	}
	for i, tt := range types {
		if err := checkType(fmt.Sprintf("Struct member %d", i), tt); err != nil {
			return nil, err
		}
		if blocklens[i] < 0 {
			c.fail("negative blocklength %d at %d", blocklens[i], i)
			break
		}
		if blocklens[i] > 0 {
			c.add(tt, int64(blocklens[i]), disps[i], tt.Extent())
		}
	}
	ints := append([]int{len(blocklens)}, blocklens...)
	return c.finish(&Type{comb: CombinerStruct, ints: ints, addrs: append([]int64(nil), disps...),
		types: append([]*Type(nil), types...)}, true)
}

// Subarray returns the subarray subsizes starting at starts of an array of
// sizes elements of old, stored in the given order
// (MPI_Type_create_subarray). Its lb is 0 and its extent is the whole array.
func Subarray(sizes, subsizes, starts []int, order Order, old *Type) (*Type, error) {
	what := "Subarray"
	if err := checkType(what, old); err != nil {
		return nil, err
	}
	n := len(sizes)
	if n == 0 || len(subsizes) != n || len(starts) != n {
		return nil, fmt.Errorf("ddt: %s: %d sizes, %d subsizes, %d starts: %w", what, n, len(subsizes), len(starts), ErrInvalid)
	}
	if order != OrderC && order != OrderFortran {
		return nil, fmt.Errorf("ddt: %s: order %d: %w", what, order, ErrInvalid)
	}
	for i := range n {
		if sizes[i] <= 0 || subsizes[i] <= 0 || starts[i] < 0 || subsizes[i] > sizes[i] || starts[i] > sizes[i]-subsizes[i] {
			return nil, fmt.Errorf("ddt: %s: dimension %d: size %d, subsize %d, start %d: %w",
				what, i, sizes[i], subsizes[i], starts[i], ErrInvalid)
		}
	}
	// Build as nested hvectors from the fastest dimension outwards, then
	// shift by the start offset and resize to the whole array.
	dim := func(k int) int { // k-th dimension from the fastest
		if order == OrderC {
			return n - 1 - k
		}
		return k
	}
	ext := old.Extent()
	cur := old
	stride := ext
	var disp int64
	var err error
	for k := 0; k < n; k++ {
		d := dim(k)
		if k == 0 {
			cur, err = Contiguous(subsizes[d], old)
		} else {
			cur, err = HVector(subsizes[d], 1, stride, cur)
		}
		if err != nil {
			return nil, fmt.Errorf("ddt: %s: %w", what, err)
		}
		off, ok := checked.Mul(int64(starts[d]), stride)
		if ok {
			disp, ok = checked.Add(disp, off)
		}
		if ok {
			stride, ok = checked.Mul(stride, int64(sizes[d]))
		}
		if !ok {
			return nil, fmt.Errorf("ddt: %s: array size: %w", what, ErrOverflow)
		}
	}
	shifted, err := HIndexedBlock(1, []int64{disp}, cur)
	if err != nil {
		return nil, fmt.Errorf("ddt: %s: %w", what, err)
	}
	full, err := Resized(shifted, 0, stride)
	if err != nil {
		return nil, fmt.Errorf("ddt: %s: %w", what, err)
	}
	ints := make([]int, 0, 2+3*n)
	ints = append(ints, n)
	ints = append(append(append(ints, sizes...), subsizes...), starts...)
	ints = append(ints, int(order))
	full.comb, full.ints, full.addrs, full.types = CombinerSubarray, ints, nil, []*Type{old}
	full.impl = shifted
	return full, nil
}

// Resized returns old with lower bound lb and extent extent
// (MPI_Type_create_resized). The data bytes do not change; the new bounds
// are explicit and propagate into types built from this one.
func Resized(old *Type, lb, extent int64) (*Type, error) {
	if err := checkType("Resized", old); err != nil {
		return nil, err
	}
	ub, ok := checked.Add(lb, extent)
	if !ok {
		return nil, fmt.Errorf("ddt: Resized: lb %d + extent %d: %w", lb, extent, ErrOverflow)
	}
	t := &Type{comb: CombinerResized, addrs: []int64{lb, extent}, types: []*Type{old},
		size: old.size, lb: lb, ub: ub, trueLB: old.trueLB, trueUB: old.trueUB,
		stickyLB: true, stickyUB: true, align: old.align, elem: old.elem}
	if err := checkBounds("Resized", t); err != nil {
		return nil, err
	}
	return t, nil
}

// Dup returns a copy of old with the same type map (MPI_Type_dup). The copy
// is committed when old is.
func Dup(old *Type) (*Type, error) {
	if err := checkType("Dup", old); err != nil {
		return nil, err
	}
	t := &Type{comb: CombinerDup, types: []*Type{old}, size: old.size, lb: old.lb, ub: old.ub,
		trueLB: old.trueLB, trueUB: old.trueUB, stickyLB: old.stickyLB, stickyUB: old.stickyUB,
		align: old.align, elem: old.elem}
	if old.Committed() {
		if err := t.Commit(); err != nil {
			return nil, err
		}
	}
	return t, nil
}
