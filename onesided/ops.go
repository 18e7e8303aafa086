package onesided

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"
)

// AtomicType is the element type of an atomic operation.
type AtomicType int

// Element types for Accumulate, FetchAndOp and CompareAndSwap.
const (
	AtomicInt32 AtomicType = iota + 1
	AtomicUint32
	AtomicInt64
	AtomicUint64
	AtomicFloat32
	AtomicFloat64
)

// Size is the element size in bytes.
func (t AtomicType) Size() int {
	switch t {
	case AtomicInt32, AtomicUint32, AtomicFloat32:
		return 4
	case AtomicInt64, AtomicUint64, AtomicFloat64:
		return 8
	}
	return 0
}

// String names the type ("int64", ...).
func (t AtomicType) String() string {
	switch t {
	case AtomicInt32:
		return "int32"
	case AtomicUint32:
		return "uint32"
	case AtomicInt64:
		return "int64"
	case AtomicUint64:
		return "uint64"
	case AtomicFloat32:
		return "float32"
	case AtomicFloat64:
		return "float64"
	}
	return fmt.Sprintf("AtomicType(%d)", int(t))
}

func (t AtomicType) isFloat() bool { return t == AtomicFloat32 || t == AtomicFloat64 }

// Op is a reduction operation for Accumulate and FetchAndOp.
type Op int

// Operations. Bitwise ones are defined on integer types only.
const (
	OpSum Op = iota + 1
	OpMin
	OpMax
	OpReplace // store the operand (MPI_REPLACE)
	OpBor
	OpBand
	OpBxor
	OpNoOp // FetchAndOp only: read atomically (MPI_NO_OP)
)

// String names the operation ("sum", ...).
func (o Op) String() string {
	switch o {
	case OpSum:
		return "sum"
	case OpMin:
		return "min"
	case OpMax:
		return "max"
	case OpReplace:
		return "replace"
	case OpBor:
		return "bor"
	case OpBand:
		return "band"
	case OpBxor:
		return "bxor"
	case OpNoOp:
		return "noop"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// checkOp validates an (op, type) pair.
func checkOp(t AtomicType, o Op) error {
	if t.Size() == 0 {
		return fmt.Errorf("type %v: %w", t, ErrInvalid)
	}
	switch o {
	case OpSum, OpMin, OpMax, OpReplace, OpNoOp:
		return nil
	case OpBor, OpBand, OpBxor:
		if t.isFloat() {
			return fmt.Errorf("bitwise %v on %v: %w", o, t, ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("op %v: %w", o, ErrInvalid)
}

// combine computes op(old, v) for values held as raw bits of type t.
func combine(t AtomicType, o Op, old, v uint64) uint64 {
	switch o {
	case OpReplace:
		return v
	case OpNoOp:
		return old
	case OpBor:
		return old | v
	case OpBand:
		return old & v
	case OpBxor:
		return old ^ v
	}
	switch t {
	case AtomicInt32:
		a, b := int32(uint32(old)), int32(uint32(v))
		return uint64(uint32(pick(o, a, b)))
	case AtomicUint32:
		return uint64(pick(o, uint32(old), uint32(v)))
	case AtomicInt64:
		return uint64(pick(o, int64(old), int64(v)))
	case AtomicUint64:
		return pick(o, old, v)
	case AtomicFloat32:
		a, b := math.Float32frombits(uint32(old)), math.Float32frombits(uint32(v))
		return uint64(math.Float32bits(pick(o, a, b)))
	case AtomicFloat64:
		a, b := math.Float64frombits(old), math.Float64frombits(v)
		return math.Float64bits(pick(o, a, b))
	}
	return old
}

func pick[T int32 | uint32 | int64 | uint64 | float32 | float64](o Op, a, b T) T {
	switch o {
	case OpSum:
		return a + b
	case OpMin:
		if b < a {
			return b
		}
		return a
	case OpMax:
		if b > a {
			return b
		}
		return a
	}
	return a
}

// atomicApply performs op on the element at p (which must be aligned to
// t.Size()) with a hardware atomic and returns the previous value.
func atomicApply(p unsafe.Pointer, t AtomicType, o Op, v uint64) uint64 {
	if t.Size() == 4 {
		a := (*uint32)(p)
		switch {
		case o == OpReplace:
			return uint64(atomic.SwapUint32(a, uint32(v)))
		case o == OpNoOp:
			return uint64(atomic.LoadUint32(a))
		case o == OpSum && !t.isFloat():
			return uint64(atomic.AddUint32(a, uint32(v)) - uint32(v))
		case o == OpBor:
			return uint64(atomic.OrUint32(a, uint32(v)))
		case o == OpBand:
			return uint64(atomic.AndUint32(a, uint32(v)))
		}
		for {
			old := atomic.LoadUint32(a)
			if atomic.CompareAndSwapUint32(a, old, uint32(combine(t, o, uint64(old), v))) {
				return uint64(old)
			}
		}
	}
	a := (*uint64)(p)
	switch {
	case o == OpReplace:
		return atomic.SwapUint64(a, v)
	case o == OpNoOp:
		return atomic.LoadUint64(a)
	case o == OpSum && !t.isFloat():
		return atomic.AddUint64(a, v) - v
	case o == OpBor:
		return atomic.OrUint64(a, v)
	case o == OpBand:
		return atomic.AndUint64(a, v)
	}
	for {
		old := atomic.LoadUint64(a)
		if atomic.CompareAndSwapUint64(a, old, combine(t, o, old, v)) {
			return old
		}
	}
}

// atomicCAS compares the element at p with cmp and, if equal, stores swap;
// it returns the previous value.
func atomicCAS(p unsafe.Pointer, t AtomicType, cmp, swap uint64) uint64 {
	if t.Size() == 4 {
		a := (*uint32)(p)
		for {
			old := atomic.LoadUint32(a)
			if old != uint32(cmp) {
				return uint64(old)
			}
			if atomic.CompareAndSwapUint32(a, old, uint32(swap)) {
				return uint64(old)
			}
		}
	}
	a := (*uint64)(p)
	for {
		old := atomic.LoadUint64(a)
		if old != cmp {
			return old
		}
		if atomic.CompareAndSwapUint64(a, old, swap) {
			return old
		}
	}
}

// loadElem / storeElem move one element between raw bits and bytes (host order).
func loadElem(b []byte, size int) uint64 {
	if size == 4 {
		return uint64(*(*uint32)(unsafe.Pointer(&b[0])))
	}
	return *(*uint64)(unsafe.Pointer(&b[0]))
}

func storeElem(b []byte, size int, v uint64) {
	if size == 4 {
		*(*uint32)(unsafe.Pointer(&b[0])) = uint32(v)
		return
	}
	*(*uint64)(unsafe.Pointer(&b[0])) = v
}

// Cmp is a comparison for WaitSignal and TestSignal.
type Cmp int

// Comparisons of the signal word against a value.
const (
	CmpEQ Cmp = iota + 1
	CmpNE
	CmpGT
	CmpGE
	CmpLT
	CmpLE
)

func (c Cmp) test(v, want uint64) bool {
	switch c {
	case CmpEQ:
		return v == want
	case CmpNE:
		return v != want
	case CmpGT:
		return v > want
	case CmpGE:
		return v >= want
	case CmpLT:
		return v < want
	case CmpLE:
		return v <= want
	}
	return false
}

func (c Cmp) valid() bool { return c >= CmpEQ && c <= CmpLE }
