package jit

import (
	"runtime"
	"unsafe"
)

// kernel is the ddtir.Kernel of one compiled type.
type kernel struct {
	p       *plan
	code    *codeMem
	pack    uintptr // entry addresses
	unpack  uintptr
	tpack   uintptr // 0 when the type has no transpose code
	tunpack uintptr
	// register-tiled transposes with non-temporal stores (0: none); used
	// for calls of at least ntPack (pack) or ntUnpack (unpack) bytes with
	// 64-byte aligned stores (config.regTileNTMin, regTileUNTMin)
	tpackNT, tunpackNT uintptr
	ntPack, ntUnpack   int64
	// narrow-band transposes (transposePlan.nband; 0: none)
	tpackN, tunpackN uintptr
	budget           int64 // packed bytes per call into generated code
	perCall          int64 // whole units per call: max(1, budget/unit)
	// origin0 is the typed origin of unit 0 relative to base, and args0 the
	// level counters there (the start of every whole pack).
	origin0 int64
	args0   callArgs
	nlv     int // outer levels whose state args0 holds (lv[:nlv])
	// onePack and oneUnpack: the most units a whole pack (unpack) from
	// stream offset 0 may have to take the one-call path, oneCall; 0 when
	// that direction has transpose code (bands) or a unit exceeds the budget.
	onePack, oneUnpack int64
}

// ntEntry returns the non-temporal transpose entry for a call moving n
// bytes, or 0 when the call is below its direction's threshold
// (ntPack for pack, ntUnpack for unpack) or the type has none.
func (k *kernel) ntEntry(n int64, pack bool) uintptr {
	if pack {
		if n < k.ntPack {
			return 0
		}
		return k.tpackNT
	}
	if n < k.ntUnpack {
		return 0
	}
	return k.tunpackNT
}

// Pack implements ddtir.Kernel.
func (k *kernel) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	if from == 0 {
		if u := k.oneUnits(count, len(packed), k.onePack); u > 0 {
			return k.oneCall(packed, typed, base, u, k.pack), nil
		}
	}
	return k.run(packed, typed, base, count, from, true), nil
}

// Unpack implements ddtir.Kernel.
func (k *kernel) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	if from == 0 {
		if u := k.oneUnits(count, len(packed), k.oneUnpack); u > 0 {
			return k.oneCall(packed, typed, base, u, k.unpack), nil
		}
	}
	return k.run(packed, typed, base, count, from, false), nil
}

// oneUnits returns the units of the whole stream of count elements when it
// may take oneCall (at most limit units, all of them fitting a packed buffer
// of packedLen bytes), else 0.
func (k *kernel) oneUnits(count, packedLen int, limit int64) int64 {
	if count <= 0 || int64(count) > limit { // (count ≤ limit keeps count*upe from overflowing)
		return 0
	}
	u := int64(count) * k.p.upe
	if u > limit || int64(packedLen) < u*k.p.unit {
		return 0
	}
	return u
}

// oneCall moves the whole stream of u units from unit 0 in one call into
// generated code. It is run's common case (a whole pack of a message within
// the budget) without run's general loop, whose frame and setup cost about
// as much as a small pack itself.
func (k *kernel) oneCall(packed, typed []byte, base, u int64, entry uintptr) int {
	var a callArgs
	k.startArgs(&a)
	a.n = u
	// no Go call between taking the addresses and the generated code
	a.typed = uintptr(unsafe.Pointer(unsafe.SliceData(typed))) + uintptr(base+k.origin0)
	a.packed = uintptr(unsafe.Pointer(unsafe.SliceData(packed)))
	callCode(entry, &a)
	runtime.KeepAlive(packed)
	runtime.KeepAlive(typed)
	runtime.KeepAlive(k)
	return int(u * k.p.unit)
}

func (k *kernel) run(packed, typed []byte, base int64, count int, from int64, pack bool) int {
	p := k.p
	total := int64(count) * p.ir.Size
	n := min(int64(len(packed)), total-from)
	if n <= 0 {
		return 0
	}
	to := from + n
	pos := from
	U := p.unit
	var a callArgs
	entry, tentry, nentry := k.pack, k.tpack, k.tpackN
	if !pack {
		entry, tentry, nentry = k.unpack, k.tunpack, k.tunpackN
	}
	ntentry := k.ntEntry(n, pack)
	// u, r: the unit at pos and the offset in it. Divisions are paid only
	// where pos is not the end of a native call (the start of a window
	// that does not begin at 0, and after the walker); a whole pack from 0
	// of a small type makes no division at all.
	u, r := int64(0), int64(0)
	if pos != 0 {
		u, r = pos/U, pos%U
	}
	for pos < to {
		if r != 0 || to-pos < U || U > k.budget {
			end := min(to, (u+1)*U)
			walk(p.body, k.origin(u, base, nil), r, end-u*U, packed[pos-from:], typed, pack)
			pos = end
			u, r = pos/U, pos%U
			continue
		}
		// Addresses are taken right before each call: no Go call between
		// them and the generated code (a goroutine stack could move at one).
		nu := k.perCall
		if left := to - pos; left < nu*U {
			if to == total { // the rest of the stream: no division
				nu = int64(count)*p.upe - u
			} else {
				nu = left / U
			}
		}
		if t := p.tr; tentry != 0 && k.bandable(t, count, pack) {
			if done := k.bands(t, u, to, base, count, pos-from, typed, packed, tentry, ntentry, nentry, pack, &a); done > 0 {
				pos += done
				u += done / U
				continue
			}
			// No band fits here: the loop code runs to the end of this
			// column only, and bands are tried again at the next.
			nu = min(nu, t.c0-u%t.c0)
		}
		o := k.origin(u, base, &a)
		a.typed = uintptr(unsafe.Pointer(unsafe.SliceData(typed))) + uintptr(o)
		a.packed = uintptr(unsafe.Pointer(unsafe.SliceData(packed))) + uintptr(pos-from)
		a.n = nu
		callCode(entry, &a)
		pos += nu * U
		u += nu
	}
	runtime.KeepAlive(packed)
	runtime.KeepAlive(typed)
	runtime.KeepAlive(k)
	return int(n)
}

func (k *kernel) origin(u, base int64, a *callArgs) int64 {
	if u == 0 {
		if a != nil {
			k.startArgs(a)
		}
		return base + k.origin0
	}
	return k.p.origin(u, base, a)
}

// startArgs sets the level counters of a for entering the code at unit 0:
// only what the code reads, the innermost counters and one state per outer
// level (a copy of all of args0 costs as much as a small pack). A loop, not
// copy: copy calls memmove, which spills every register of the caller.
func (k *kernel) startArgs(a *callArgs) {
	a.ctr0, a.pos0 = k.args0.ctr0, k.args0.pos0
	for i := range k.nlv {
		a.lv[i] = k.args0.lv[i]
	}
}

// setup fills the per-call constants of k from its plan and budget.
func (k *kernel) setup() {
	k.perCall = max(1, k.budget/k.p.unit)
	k.origin0 = k.p.origin(0, 0, &k.args0)
	k.nlv = max(0, len(k.p.levels)-1)
	if k.p.unit <= k.budget {
		if k.tpack == 0 {
			k.onePack = k.perCall
		}
		if k.tunpack == 0 {
			k.oneUnpack = k.perCall
		}
	}
}

// bands runs the cache-blocked transpose code over the whole bands that start
// at unit u and end before stream offset to, at most one grandparent instance
// and one budget at a time: bands of the wide shape, or where none fits,
// of the narrow one. It returns the packed bytes done (0 when u is not at
// the start of a parent instance, a column, or no whole band fits).
func (k *kernel) bands(t *transposePlan, u, to, base int64, count int, poff int64, typed, packed []byte, entry, ntentry, nentry uintptr, pack bool, a *callArgs) int64 {
	p := k.p
	// parent instance index j of unit u and the parent's count c1
	ju := u / t.c0 // units of the innermost loop are rows; ju counts parent instances overall
	if u%t.c0 != 0 {
		return 0
	}
	c1 := t.parentCount(p, count)
	j := ju % c1
	// whole bands from j (any column: the band code starts where it is
	// told) that end within this parent and the window: nb of the
	// ordinary shape, nbNT of the non-temporal one (its bands may be
	// wider), else of the narrow one
	pos := u * p.unit
	whole := func(band, bandSize int64) int64 {
		return min((c1-j)/band, (to-pos)/bandSize, max(1, k.budget/bandSize))
	}
	band, _, bandSize := t.dims(pack, false)
	nb := whole(band, bandSize)
	nbNT, bandSizeNT := int64(0), int64(0)
	if ntentry != 0 {
		band, _, bandSizeNT = t.dims(pack, true)
		nbNT = whole(band, bandSizeNT)
	}
	if nb <= 0 && nbNT <= 0 {
		if nentry == 0 {
			return 0
		}
		band, _, bandSize = t.narrowDims(pack)
		if nb = whole(band, bandSize); nb <= 0 {
			return 0
		}
		entry = nentry
	}
	o := k.origin(u, base, nil)
	// From here to the call no Go function is called: the alignment checked
	// is the alignment the code sees.
	a.typed = uintptr(unsafe.Pointer(unsafe.SliceData(typed))) + uintptr(o)
	a.packed = uintptr(unsafe.Pointer(unsafe.SliceData(packed))) + uintptr(poff)
	// Non-temporal stores need 64-byte aligned destinations: the packed
	// side for pack (bands, columns and row groups are multiples of 64 bytes
	// apart), the typed side for unpack (rows s0 apart).
	if nbNT > 0 && (pack && a.packed%64 == 0 || !pack && a.typed%64 == 0 && t.s0%64 == 0) {
		entry, nb, bandSize = ntentry, nbNT, bandSizeNT
	}
	if nb <= 0 {
		return 0
	}
	a.n = nb
	callCode(entry, a)
	return nb * bandSize
}

// bandable reports whether count elements of t's type may run through
// its transpose code in direction pack: a parent of at least one band
// (of the narrow shape where there is one), and not an unpack whose rows
// overlap, which keeps the interpreter's write order.
func (k *kernel) bandable(t *transposePlan, count int, pack bool) bool {
	c1 := t.parentCount(k.p, count)
	band, _, _ := t.dims(pack, false)
	if t.nband > 0 {
		band = min(band, t.nband)
	}
	return c1 >= band && (pack || c1*t.s1 <= t.s0)
}

// parentCount is the count of t's parent level (the element loop's count
// when the parent is the element loop).
func (t *transposePlan) parentCount(p *plan, count int) int64 {
	if t.parent >= 0 {
		return p.levels[t.parent].count
	}
	return int64(count)
}

// origin returns the typed index of the origin of unit u and, when a is not
// nil, fills the level counters for entering generated code at u.
func (p *plan) origin(u, base int64, a *callArgs) int64 {
	e, r := u/p.upe, u%p.upe
	o := base + e*p.ir.Extent
	for j := len(p.levels) - 1; j >= 0; j-- {
		l := &p.levels[j]
		i := r / p.below[j]
		r %= p.below[j]
		o += l.disp + l.off(i)
		if a != nil {
			if j == 0 {
				a.ctr0, a.pos0 = l.count-i, i
			} else {
				a.lv[j-1] = levelState{ctr: l.count - i, pos: i}
			}
		}
	}
	if a != nil && len(p.levels) == 0 {
		a.ctr0 = 1 << 62 // the element loop: bounded by n
	}
	return o
}
