package collectives

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/internal/vecop"
)

// Integer is the set of Go's integer types.
type Integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr
}

// Float is the set of Go's floating-point types.
type Float interface{ ~float32 | ~float64 }

// Complex is the set of Go's complex types.
type Complex interface{ ~complex64 | ~complex128 }

// Real is the set of ordered numbers: integers and floats.
type Real interface{ Integer | Float }

// Number is the set of Go's numeric types, the element types of the
// arithmetic operations (Sum and Prod also take complex numbers; Min and
// Max only Real ones; the logical and bitwise operations only integers).
type Number interface{ Integer | Float | Complex }

// Op is a reduction operation on elements of type T: a function that
// combines two vectors element by element, and whether it is commutative.
// Sum, Prod, Min, Max, the logical and bitwise operations and MinLoc and
// MaxLoc are built in; NewOp makes one from a Go function. Every
// operation is taken to be associative (floating-point rounding aside:
// see Deterministic). The zero Op is invalid.
type Op[T any] struct {
	name        string
	code        uint8 // built-in operations: their number, for the argument signature; user: opUser
	fn          func(inout, in []T)
	commutative bool
}

const (
	opUser uint8 = iota + 1
	opSum
	opProd
	opMin
	opMax
	opLAnd
	opLOr
	opLXor
	opBAnd
	opBOr
	opBXor
	opMinLoc
	opMaxLoc
)

// NewOp returns a user operation. f(inout, in) must set, for every i,
// inout[i] = inout[i] ∘ in[i], where inout holds the combination of
// lower-ranked contributions than in (the left operand) and the two
// slices have the same length; it is called on whole vectors or on any
// part of them, and must neither keep nor resize them. commutative says
// whether a ∘ b = b ∘ a: a non-commutative operation is combined in rank
// order, x₀ ∘ x₁ ∘ … ∘ x_{p-1} (with any association).
func NewOp[T any](name string, f func(inout, in []T), commutative bool) Op[T] {
	return Op[T]{name: name, code: opUser, fn: f, commutative: commutative}
}

// String returns the operation's name.
func (o Op[T]) String() string {
	if o.name == "" {
		return "Op(nil)"
	}
	return o.name
}

// Commutative reports whether the operation is commutative.
func (o Op[T]) Commutative() bool { return o.commutative }

// Apply combines two local vectors as the collectives do: inout[i] =
// inout[i] ∘ in[i]. The lengths must match.
func (o Op[T]) Apply(inout, in []T) error {
	if err := o.valid(); err != nil {
		return fmt.Errorf("collectives: apply: %w", err)
	}
	if len(inout) != len(in) {
		return fmt.Errorf("collectives: apply %s to %d and %d elements: %w", o, len(inout), len(in), ErrInvalid)
	}
	o.fn(inout, in)
	return nil
}

func (o *Op[T]) valid() error {
	if o.fn == nil {
		return fmt.Errorf("nil reduction operation: %w", ErrInvalid)
	}
	return nil
}

// left sets acc = acc ∘ in.
func (o *Op[T]) left(acc, in []T) { o.fn(acc, in) }

// right sets acc = in ∘ acc; in may be overwritten.
func (o *Op[T]) right(acc, in []T) {
	if o.commutative {
		o.fn(acc, in)
		return
	}
	o.fn(in, acc)
	memcopy.CopyOf(acc, in)
}

// Sum adds (MPI_SUM).
func Sum[T Number]() Op[T] { return Op[T]{"sum", opSum, sumOf[T], true} }

// Prod multiplies (MPI_PROD).
func Prod[T Number]() Op[T] { return Op[T]{"prod", opProd, prodOf[T], true} }

// Min keeps the smaller (MPI_MIN; with Go's min, so a NaN wins).
func Min[T Real]() Op[T] { return Op[T]{"min", opMin, minOf[T], true} }

// Max keeps the larger (MPI_MAX; with Go's max, so a NaN wins).
func Max[T Real]() Op[T] { return Op[T]{"max", opMax, maxOf[T], true} }

// LAnd is the logical and of integers taken as truth values (non-zero is
// true; the result is 1 or 0), MPI_LAND.
func LAnd[T Integer]() Op[T] { return Op[T]{"land", opLAnd, landOf[T], true} }

// LOr is the logical or (MPI_LOR); see LAnd.
func LOr[T Integer]() Op[T] { return Op[T]{"lor", opLOr, lorOf[T], true} }

// LXor is the logical exclusive or (MPI_LXOR); see LAnd.
func LXor[T Integer]() Op[T] { return Op[T]{"lxor", opLXor, lxorOf[T], true} }

// BAnd is the bitwise and (MPI_BAND).
func BAnd[T Integer]() Op[T] { return Op[T]{"band", opBAnd, bandOf[T], true} }

// BOr is the bitwise or (MPI_BOR).
func BOr[T Integer]() Op[T] { return Op[T]{"bor", opBOr, borOf[T], true} }

// BXor is the bitwise exclusive or (MPI_BXOR).
func BXor[T Integer]() Op[T] { return Op[T]{"bxor", opBXor, bxorOf[T], true} }

// Loc is a value with an index, the element of MinLoc and MaxLoc (MPI's
// value-index pair types such as MPI_DOUBLE_INT).
type Loc[T Real] struct {
	Val T
	Idx int
}

// MinLoc keeps the smaller value with its index, the smaller index among
// equal values (MPI_MINLOC).
func MinLoc[T Real]() Op[Loc[T]] { return Op[Loc[T]]{"minloc", opMinLoc, minLocOf[T], true} }

// MaxLoc keeps the larger value with its index, the smaller index among
// equal values (MPI_MAXLOC).
func MaxLoc[T Real]() Op[Loc[T]] { return Op[Loc[T]]{"maxloc", opMaxLoc, maxLocOf[T], true} }

// kernelKind returns the vecop element kind of T for op, or 0 where no
// vector kernel applies. A complex number's sum is the sum of its float
// parts.
func kernelKind[T any](op vecop.Op) vecop.Kind {
	t := reflect.TypeFor[T]()
	switch t.Kind() {
	case reflect.Int8:
		return vecop.Int8
	case reflect.Int16:
		return vecop.Int16
	case reflect.Int32:
		return vecop.Int32
	case reflect.Int64:
		return vecop.Int64
	case reflect.Int:
		return sized(t.Size(), vecop.Int32, vecop.Int64)
	case reflect.Uint8:
		return vecop.Uint8
	case reflect.Uint16:
		return vecop.Uint16
	case reflect.Uint32:
		return vecop.Uint32
	case reflect.Uint64:
		return vecop.Uint64
	case reflect.Uint, reflect.Uintptr:
		return sized(t.Size(), vecop.Uint32, vecop.Uint64)
	case reflect.Float32:
		return vecop.Float32
	case reflect.Float64:
		return vecop.Float64
	case reflect.Complex64:
		if op == vecop.Sum {
			return vecop.Float32
		}
	case reflect.Complex128:
		if op == vecop.Sum {
			return vecop.Float64
		}
	}
	return 0
}

func sized(size uintptr, k4, k8 vecop.Kind) vecop.Kind {
	if size == 4 {
		return k4
	}
	return k8
}

// vector applies op's vector kernel to inout and in if T has one and the
// vectors are long enough for it to pay, and reports whether it did.
// The kernels are element-wise, so the result is bitwise the scalar
// loop's (Deterministic holds either way).
func vector[T any](op vecop.Op, inout, in []T) bool {
	var z T
	n := len(inout) * int(unsafe.Sizeof(z))
	if n < vecop.MinBytes || !vecop.Enabled() {
		return false
	}
	f := vecop.Func(kernelKind[T](op), op)
	if f == nil {
		return false
	}
	in = in[:len(inout)]
	f(unsafe.Pointer(unsafe.SliceData(inout)), unsafe.Pointer(unsafe.SliceData(in)), n)
	return true
}

// sumOf adds with the vector kernel, or eight elements a step (the
// compiler drops the bounds checks inside a step and overlaps the
// additions), then the rest.
func sumOf[T Number](inout, in []T) {
	if vector(vecop.Sum, inout, in) {
		return
	}
	in = in[:len(inout)]
	i := 0
	for ; i+8 <= len(inout); i += 8 {
		x, y := inout[i:i+8:i+8], in[i:i+8:i+8]
		x[0] += y[0]
		x[1] += y[1]
		x[2] += y[2]
		x[3] += y[3]
		x[4] += y[4]
		x[5] += y[5]
		x[6] += y[6]
		x[7] += y[7]
	}
	for ; i < len(inout); i++ {
		inout[i] += in[i]
	}
}

func prodOf[T Number](inout, in []T) {
	if vector(vecop.Prod, inout, in) {
		return
	}
	in = in[:len(inout)]
	for i := range inout {
		inout[i] *= in[i]
	}
}

func minOf[T Real](inout, in []T) {
	if vector(vecop.Min, inout, in) {
		return
	}
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = min(inout[i], in[i])
	}
}

func maxOf[T Real](inout, in []T) {
	if vector(vecop.Max, inout, in) {
		return
	}
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = max(inout[i], in[i])
	}
}

func truth[T Integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

func landOf[T Integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = truth[T](inout[i] != 0 && in[i] != 0)
	}
}

func lorOf[T Integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = truth[T](inout[i] != 0 || in[i] != 0)
	}
}

func lxorOf[T Integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = truth[T]((inout[i] != 0) != (in[i] != 0))
	}
}

func bandOf[T Integer](inout, in []T) {
	if vector(vecop.BAnd, inout, in) {
		return
	}
	in = in[:len(inout)]
	for i := range inout {
		inout[i] &= in[i]
	}
}

func borOf[T Integer](inout, in []T) {
	if vector(vecop.BOr, inout, in) {
		return
	}
	in = in[:len(inout)]
	for i := range inout {
		inout[i] |= in[i]
	}
}

func bxorOf[T Integer](inout, in []T) {
	if vector(vecop.BXor, inout, in) {
		return
	}
	in = in[:len(inout)]
	for i := range inout {
		inout[i] ^= in[i]
	}
}

func minLocOf[T Real](inout, in []Loc[T]) {
	in = in[:len(inout)]
	for i := range inout {
		a, b := inout[i], in[i]
		if b.Val < a.Val || (b.Val == a.Val && b.Idx < a.Idx) {
			inout[i] = b
		}
	}
}

func maxLocOf[T Real](inout, in []Loc[T]) {
	in = in[:len(inout)]
	for i := range inout {
		a, b := inout[i], in[i]
		if b.Val > a.Val || (b.Val == a.Val && b.Idx < a.Idx) {
			inout[i] = b
		}
	}
}

// pointerFree caches, per element type, whether it holds no pointers.
var pointerFree sync.Map // reflect.Type → bool

// elemSize returns the size of T, or an error if T cannot travel as its
// bytes: it holds pointers (strings, slices, maps, ...), or is empty.
func elemSize[T any]() (int, error) {
	var z T
	n := int(unsafe.Sizeof(z))
	switch any(z).(type) {
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint, uintptr,
		float32, float64, complex64, complex128:
		return n, nil // the common case, without the cache's lookup
	}
	t := reflect.TypeFor[T]()
	free, ok := pointerFree.Load(t)
	if !ok {
		free = !hasPointers(t)
		pointerFree.Store(t, free)
	}
	if !free.(bool) {
		return 0, fmt.Errorf("element type %v holds pointers (only numbers, arrays and structs of them travel): %w", t, ErrInvalid)
	}
	if n == 0 {
		return 0, fmt.Errorf("element type %v has size 0: %w", t, ErrInvalid)
	}
	return n, nil
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}

// bytesOf views the memory of s as bytes (T pointer-free).
func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// elems views b, 8-byte aligned scratch or bytesOf a []T, as a []T.
func elems[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
