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
	return m
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
	for j, l := range m.p.levels {
		i := m.lv[j].div32(r)
		r -= i * uint32(m.cw[j])
		if l.tab < 0 {
			a += int64(i) * l.stride
		} else {
			a += m.p.tab[l.tab+int64(i)]
		}
	}
	rb := int64(r) * m.v.w
	if !m.p.list {
		return a + rb
	}
	b := int64(0)
	for step := m.p.listPad / 2; step >= 1; step /= 2 {
		if m.p.tab[m.p.prePos+b+step] <= rb {
			b += step
		}
	}
	return a + m.p.tab[m.p.offsPos+b] + rb - m.p.tab[m.p.prePos+b]
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
	m := p.vmath(v)
	q0 := uint64(from / v.w)
	for t := int64(0); t < n/v.w; t++ {
		a := base + m.src(q0+uint64(t))
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
