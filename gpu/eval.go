package gpu

import (
	"fmt"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/checked"
)

// variant selects one kernel of a plan: the word size, 32- or 64-bit
// element split, and the direction.
type variant struct {
	w      int64
	wide   bool
	unpack bool
	grid3  bool // the 3-D launch: x the body's words, y the innermost level, z the rest
}

// vmath is the per-variant arithmetic both emitters and the Go evaluator
// use: the divisions of the index decomposition in words.
type vmath struct {
	p    *Plan
	v    variant
	wpe  int64   // words per element
	elem magic   // division by wpe (32- or 64-bit)
	lv   []magic // division by words per child, per level (32-bit)
	cw   []int64 // words per child, per level

	// The 3-D launch (grid3): thread (x, y, z) moves word (z*d1 + y)*d0 + x.
	d0, d1 int64   // words per body instance; instances of the innermost level
	rows   magic   // division by d0*d1 (the window's first row)
	per    magic   // division by rows per element
	zl     []magic // division by rows per child, for the levels above the innermost
	zc     []int64 // rows per child, for the levels above the innermost
}

func (p *Plan) vmath(v variant) *vmath {
	m := &vmath{p: p, v: v, wpe: p.size / v.w}
	if m.wpe == 0 {
		return m
	}
	m.elem = newMagic(uint64(m.wpe), v.wide)
	for _, l := range p.levels {
		cw := l.child / v.w
		m.cw = append(m.cw, cw)
		m.lv = append(m.lv, newMagic(uint64(cw), false))
	}
	if v.grid3 && len(p.levels) > 0 {
		last := len(p.levels) - 1
		m.d0, m.d1 = p.unit/v.w, p.levels[last].count
		rowWords := m.d0 * m.d1
		m.rows = newMagic(uint64(rowWords), false)
		m.per = newMagic(uint64(m.wpe/rowWords), false)
		for j := 0; j < last; j++ {
			zc := m.cw[j] / rowWords
			m.zc = append(m.zc, zc)
			m.zl = append(m.zl, newMagic(uint64(zc), false))
		}
	}
	return m
}

// grid3Fits reports whether the 3-D launch of p can move words [q0, q0+n)
// with word size w: a level to put on y, 32-bit indices, and the launch
// within CUDA's grid limits (y and z at most 65535 blocks).
func (p *Plan) grid3Fits(w int64, q0, n uint64, block int) (d0, d1, zlo, zn int64, ok bool) {
	if len(p.levels) == 0 || q0+n >= 1<<31 || n == 0 {
		return 0, 0, 0, 0, false
	}
	d0, d1 = p.unit/w, p.levels[len(p.levels)-1].count
	row := uint64(d0 * d1)
	zlo = int64(q0 / row)
	zn = int64((q0+n-1)/row) + 1 - zlo
	bx, by := shape3(d0, d1, block)
	if zn > 65535 || (d1+by-1)/by > 65535 || (d0+bx-1)/bx > 1<<31-1 {
		return 0, 0, 0, 0, false
	}
	return d0, d1, zlo, zn, true
}

// shape3 returns the thread block of a 3-D launch of block threads: x
// covers the body's words first (powers of two), y the rest.
func shape3(d0, d1 int64, block int) (bx, by int64) {
	bx = 1
	for bx < d0 && bx < int64(block) {
		bx *= 2
	}
	by = int64(block) / bx
	for by > 1 && by/2 >= d1 {
		by /= 2
	}
	return bx, by
}

// src3 is src for the 3-D launch: thread (x, y, z) computed as the kernel
// computes its typed offset.
func (m *vmath) src3(x, y, z uint32) int64 {
	k := m.per.div32(z)
	rz := z - k*uint32(m.wpe/(m.d0*m.d1))
	a := int64(k)*m.p.extent + m.p.disp
	last := len(m.p.levels) - 1
	for j := 0; j < last; j++ {
		i := m.zl[j].div32(rz)
		rz -= i * uint32(m.zc[j])
		a += m.levelOff(j, i)
	}
	a += m.levelOff(last, y)
	return a + m.body(int64(x)*m.v.w)
}

// levelOff is the offset of instance i of level j.
func (m *vmath) levelOff(j int, i uint32) int64 {
	if l := m.p.levels[j]; l.tab >= 0 {
		return m.p.tab[l.tab+int64(i)]
	}
	return int64(i) * m.p.levels[j].stride
}

// body is the typed offset of byte rb (a word start) of the body.
func (m *vmath) body(rb int64) int64 {
	if !m.p.list {
		return rb
	}
	b := int64(0)
	for step := m.p.listPad / 2; step >= 1; step /= 2 {
		if m.p.tab[m.p.prePos+b+step] <= rb {
			b += step
		}
	}
	return m.p.tab[m.p.offsPos+b] + rb - m.p.tab[m.p.prePos+b]
}

// src returns the typed byte offset, relative to displacement 0 of element
// 0, of stream word q, computed exactly as the kernels compute it (32-bit
// wrap-around included).
func (m *vmath) src(q uint64) int64 {
	var k uint64
	var r uint32
	if m.v.wide {
		k = m.elem.div64(q)
		r = uint32(q - k*uint64(m.wpe))
	} else {
		q32 := uint32(q)
		k32 := m.elem.div32(q32)
		r = q32 - k32*uint32(m.wpe)
		k = uint64(k32)
	}
	a := int64(k)*m.p.extent + m.p.disp
	for j := range m.p.levels {
		i := m.lv[j].div32(r)
		r -= i * uint32(m.cw[j])
		a += m.levelOff(j, i)
	}
	return a + m.body(int64(r)*m.v.w)
}

// word picks the variant of a launch: the largest word size of the plan
// that divides the window's start and length and the addresses of the
// typed origin and the packed window (given modulo maxWordSize), and the
// 64-bit element split when the last word reaches 2^31.
func (p *Plan) word(from, n int64, typedAddr, packedAddr uint64, unpack bool) variant {
	w := p.maxWord
	for w > 1 && (from%w != 0 || n%w != 0 || typedAddr%uint64(w) != 0 || packedAddr%uint64(w) != 0) {
		w /= 2
	}
	return variant{w: w, wide: (from+n)/w >= 1<<31, unpack: unpack}
}

// Emulator returns a ddt.Kernel that moves bytes by evaluating, word by
// word on the CPU, exactly the index arithmetic of the plan's GPU kernels
// (the same variant choice, magic divisions and table look-ups). It exists
// to test the plan against ddt's interpreter; it is slow. Its methods check
// their arguments as ddt.Type.PackRange does.
func (p *Plan) Emulator() ddt.Kernel { return emulator{p: p} }

type emulator struct {
	p     *Plan
	force *variant // tests: this word size and split instead of the launch's choice
}

func (e emulator) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	return e.run(packed, typed, base, count, from, false)
}

func (e emulator) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	return e.run(packed, typed, base, count, from, true)
}

func (e emulator) run(packed, typed []byte, base int64, count int, from int64, unpack bool) (int, error) {
	p := e.p
	n, err := p.window(int64(len(typed)), base, count, from, int64(len(packed)))
	if err != nil || n == 0 {
		return 0, err
	}
	// The typed slice stands for a device allocation (aligned to 256 bytes):
	// the origin's alignment is that of base.
	v := p.word(from, n, uint64(base), 0, unpack)
	if e.force != nil && from%e.force.w == 0 && n%e.force.w == 0 && base%e.force.w == 0 && e.force.w <= p.maxWord {
		v = variant{w: e.force.w, wide: e.force.wide || v.wide, unpack: unpack}
	}
	q0 := uint64(from / v.w)
	if _, _, _, _, ok := p.grid3Fits(v.w, q0, uint64(n/v.w), 256); ok && !v.wide && (e.force == nil || e.force.grid3) {
		v.grid3 = true
	}
	m := p.vmath(v)
	for t := int64(0); t < n/v.w; t++ {
		var a int64
		if q := q0 + uint64(t); v.grid3 {
			// the thread coordinates of word q, then the kernel's arithmetic
			x, y, z := q%uint64(m.d0), q/uint64(m.d0)%uint64(m.d1), q/uint64(m.d0*m.d1)
			a = base + m.src3(uint32(x), uint32(y), uint32(z))
		} else {
			a = base + m.src(q)
		}
		if a < 0 || a+v.w > int64(len(typed)) {
			return 0, fmt.Errorf("gpu: internal: word %d maps to typed byte %d outside [0,%d)", q0+uint64(t), a, len(typed))
		}
		if unpack {
			copy(typed[a:a+v.w], packed[t*v.w:(t+1)*v.w])
		} else {
			copy(packed[t*v.w:(t+1)*v.w], typed[a:a+v.w])
		}
	}
	return int(n), nil
}

// window checks a pack or unpack of count elements, the typed origin at
// byte base of a typed buffer of typedLen bytes, the stream window starting
// at from with room for avail bytes, the way ddt.Type.PackRange checks its
// arguments, and returns the number of bytes to move.
func (p *Plan) window(typedLen, base int64, count int, from, avail int64) (int64, error) {
	if count < 0 || from < 0 || avail < 0 {
		return 0, fmt.Errorf("gpu: count %d, from %d, window %d: %w", count, from, avail, ddt.ErrInvalid)
	}
	total, ok := checked.Mul(int64(count), p.size)
	if !ok {
		return 0, fmt.Errorf("gpu: %d elements of %d bytes: %w", count, p.size, ddt.ErrOverflow)
	}
	if from > total {
		return 0, fmt.Errorf("gpu: stream offset %d beyond %d bytes: %w", from, total, ddt.ErrBounds)
	}
	if count == 0 || p.size == 0 {
		return 0, nil
	}
	// Element k touches [base + k*extent + trueLB, ... + trueExtent).
	ir := p.ir
	last, ok1 := checked.Mul(int64(count-1), ir.Extent)
	lo, ok2 := checked.Add(base, ir.TrueLB+min(0, last))
	hi, ok3 := checked.Add(base, ir.TrueLB+ir.TrueExtent)
	if ok3 {
		hi, ok3 = checked.Add(hi, max(0, last))
	}
	if !ok1 || !ok2 || !ok3 {
		return 0, fmt.Errorf("gpu: bounds of %d elements at base %d: %w", count, base, ddt.ErrOverflow)
	}
	if lo < 0 || hi > typedLen {
		return 0, fmt.Errorf("gpu: %d elements at base %d touch bytes [%d,%d) of a %d-byte buffer: %w",
			count, base, lo, hi, typedLen, ddt.ErrBounds)
	}
	return min(avail, total-from), nil
}
