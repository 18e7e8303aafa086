package gpu

import (
	"fmt"
	"strings"
)

// The PTX emitter. A Device builds one kernel per module (kernelSource):
// the variant a launch needs, on first use. The whole module of a plan and
// word size (PTX) holds all its kernels: pack and unpack, each for the 3-D
// launch (plans with levels) and the 1-D launch with the 32- and the
// 64-bit element split.
// The text targets PTX ISA 7.8 and sm_80; the driver's JIT compiles it for
// the GPU it finds (sm_90 included). Every kernel has the signature
//
//	.entry NAME(.param .u64 typed, .param .u64 packed, .param .u64 tab,
//	            .param .u64 q0, .param .u64 n)
//
// typed: the device address of displacement 0 of element 0; packed: the
// address of the window's first byte; tab: the plan's lookaside table
// (int64 entries); q0: the window's first stream word; n: its words. In
// the 1-D kernels a grid-stride loop runs t over [0, n) and thread t moves
// word q0+t; in the 3-D ones thread (x, y, z) moves word
// ((q0/(d0*d1) + z)*d1 + y)*d0 + x when it lies in the window. The
// instruction subset is small on purpose (ld.param, mov of the special
// registers, cvta, add/sub/mul/mad/shr, cvt, setp/selp, bra, ld/st.global,
// ret), and internal/ptxsim executes exactly that subset in tests.

// ptxKinds lists the kernels of a whole module in their order.
var ptxKinds = []variant{{wide: false}, {wide: true}, {wide: false, unpack: true}, {wide: true, unpack: true},
	{grid3: true}, {grid3: true, unpack: true}}

// kinds returns the kernels of p's whole modules: the 3-D ones only for
// plans with a level to put on y.
func (p *Plan) kinds() []variant {
	if len(p.levels) == 0 {
		return ptxKinds[:4]
	}
	return ptxKinds
}

// allKinds returns the kernels of p's whole module for word size w.
func (p *Plan) allKinds(w int64) []variant {
	ks := append([]variant(nil), p.kinds()...)
	for i := range ks {
		ks[i].w = w
	}
	return ks
}

// kernelName is the symbol of variant v of plan p.
func (p *Plan) kernelName(v variant) string {
	dir := "pack"
	if v.unpack {
		dir = "unpack"
	}
	split := "n"
	switch {
	case v.wide:
		split = "w"
	case v.grid3:
		split = "g"
	}
	return fmt.Sprintf("weft_%s_w%d_%s_%s", p.name, v.w, dir, split)
}

// PTX returns the PTX module of the plan for word size w (a power of two
// not above MaxWord): pack and unpack for the 3-D launch and the 1-D launch
// with 32- and 64-bit element splits. w ≤ 0 means MaxWord.
func (p *Plan) PTX(w int64) (string, error) {
	w, err := p.checkWord(w)
	if err != nil {
		return "", err
	}
	return p.source(srcKey{lang: langPTX, v: variant{w: w}, all: true}), nil
}

func (p *Plan) checkWord(w int64) (int64, error) {
	if w <= 0 {
		w = p.maxWord
	}
	if w&(w-1) != 0 || w > p.maxWord {
		return 0, fmt.Errorf("gpu: word size %d: want a power of two up to %d: %w", w, p.maxWord, errInvalid)
	}
	return w, nil
}

// emitPTX returns a PTX module holding the kernels ks, in that order.
func (p *Plan) emitPTX(ks []variant) string {
	var b strings.Builder
	b.WriteString("//\n// weft gpu kernels, generated from the datatype IR:\n")
	for _, l := range p.irLines() {
		b.WriteString("//   " + l + "\n")
	}
	b.WriteString("//\n.version 7.8\n.target sm_80\n.address_size 64\n")
	for _, k := range ks {
		g := &ptxGen{}
		g.kernel(p, k)
		fmt.Fprintf(&b, "\n.visible .entry %s(\n\t.param .u64 typed,\n\t.param .u64 packed,\n\t.param .u64 tab,\n\t.param .u64 q0,\n\t.param .u64 n\n)\n{\n", p.kernelName(k))
		fmt.Fprintf(&b, "\t.reg .pred %%p<%d>;\n\t.reg .b32 %%r<%d>;\n\t.reg .b64 %%rd<%d>;\n\n", g.np+1, g.nr+1, g.nrd+1)
		b.WriteString(g.b.String())
		b.WriteString("}\n")
	}
	return b.String()
}

type ptxGen struct {
	b           strings.Builder
	nr, nrd, np int
}

func (g *ptxGen) r() string  { g.nr++; return fmt.Sprintf("%%r%d", g.nr) }
func (g *ptxGen) rd() string { g.nrd++; return fmt.Sprintf("%%rd%d", g.nrd) }
func (g *ptxGen) p() string  { g.np++; return fmt.Sprintf("%%p%d", g.np) }
func (g *ptxGen) op(f string, a ...any) {
	g.b.WriteString("\t")
	fmt.Fprintf(&g.b, f, a...)
	g.b.WriteString(";\n")
}
func (g *ptxGen) label(l string) { g.b.WriteString(l + ":\n") }

// div32 emits q / mg (32-bit) into a new register.
func (g *ptxGen) div32(q string, mg magic) string {
	if mg.d == 1 {
		return q
	}
	k := g.r()
	if mg.pow2() {
		g.op("shr.u32 %s, %s, %d", k, q, mg.shift)
		return k
	}
	g.op("mul.hi.u32 %s, %s, %d", k, q, uint32(mg.m))
	if mg.shift > 0 {
		g.op("shr.u32 %s, %s, %d", k, k, mg.shift)
	}
	return k
}

// tabLoad emits a load of table entry pos+i (i a 32-bit register).
func (g *ptxGen) tabLoad(tab, i string, pos int64) string {
	o, a, v := g.rd(), g.rd(), g.rd()
	g.op("mul.wide.u32 %s, %s, 8", o, i)
	g.op("add.s64 %s, %s, %s", a, tab, o)
	g.op("ld.global.nc.u64 %s, [%s+%d]", v, a, pos*8)
	return v
}

func (g *ptxGen) kernel(p *Plan, v variant) {
	if v.grid3 {
		g.kernel3(p, v)
		return
	}
	m := p.vmath(v)
	typed, packed, tab, q0, n := g.params()
	tid, ntid, cta, ncta, t, step := g.r(), g.r(), g.r(), g.r(), g.r(), g.r()
	g.op("mov.u32 %s, %%tid.x", tid)
	g.op("mov.u32 %s, %%ntid.x", ntid)
	g.op("mov.u32 %s, %%ctaid.x", cta)
	g.op("mov.u32 %s, %%nctaid.x", ncta)
	g.op("mad.lo.u32 %s, %s, %s, %s", t, cta, ntid, tid)
	g.op("mul.lo.u32 %s, %s, %s", step, ntid, ncta)
	done := g.p()
	var t64, step64, n32, q032 string
	if v.wide {
		t64, step64 = g.rd(), g.rd()
		g.op("cvt.u64.u32 %s, %s", t64, t)
		g.op("cvt.u64.u32 %s, %s", step64, step)
		g.op("setp.ge.u64 %s, %s, %s", done, t64, n)
	} else {
		n32, q032 = g.r(), g.r()
		g.op("cvt.u32.u64 %s, %s", n32, n)
		g.op("cvt.u32.u64 %s, %s", q032, q0)
		g.op("setp.ge.u32 %s, %s, %s", done, t, n32)
	}
	g.op("@%s bra DONE", done)
	g.label("LOOP")
	// Element split: k = q / wpe, r = q - k*wpe; a = k*extent + disp.
	k64, a := g.rd(), g.rd()
	var r string
	if v.wide {
		q := g.rd()
		g.op("add.s64 %s, %s, %s", q, q0, t64)
		k := q
		if m.elem.d != 1 {
			k = g.rd()
			if m.elem.pow2() {
				g.op("shr.u64 %s, %s, %d", k, q, m.elem.shift)
			} else {
				g.op("mul.hi.u64 %s, %s, %dU", k, q, m.elem.m)
				if m.elem.shift > 0 {
					g.op("shr.u64 %s, %s, %d", k, k, m.elem.shift)
				}
			}
		}
		kw, r64 := g.rd(), g.rd()
		g.op("mul.lo.u64 %s, %s, %d", kw, k, m.wpe)
		g.op("sub.s64 %s, %s, %s", r64, q, kw)
		r = g.r()
		g.op("cvt.u32.u64 %s, %s", r, r64)
		g.op("mov.b64 %s, %s", k64, k)
	} else {
		q := g.r()
		g.op("add.s32 %s, %s, %s", q, q032, t)
		k := g.div32(q, m.elem)
		kw := g.r()
		r = g.r()
		g.op("mul.lo.s32 %s, %s, %d", kw, k, uint32(m.wpe))
		g.op("sub.s32 %s, %s, %s", r, q, kw)
		g.op("cvt.u64.u32 %s, %s", k64, k)
	}
	g.op("mul.lo.s64 %s, %s, %d", a, k64, p.extent)
	if p.disp != 0 {
		g.op("add.s64 %s, %s, %d", a, a, p.disp)
	}
	for j := range p.levels {
		i := r
		if m.cw[j] == 1 { // one word per child: i = r, nothing left below
			r = g.r()
			g.op("mov.u32 %s, 0", r)
		} else {
			i = g.div32(r, m.lv[j])
			r = g.subMul(r, i, m.cw[j])
		}
		g.levelAdd(p, j, i, a, tab)
	}
	rb := g.rd()
	g.op("mul.wide.u32 %s, %s, %d", rb, r, v.w)
	g.bodyAdd(p, rb, a, tab)
	po := g.rd()
	if v.wide {
		g.op("mul.lo.u64 %s, %s, %d", po, t64, v.w)
	} else {
		g.op("mul.wide.u32 %s, %s, %d", po, t, v.w)
	}
	g.move(v, typed, packed, a, po)
	more := g.p()
	if v.wide {
		g.op("add.s64 %s, %s, %s", t64, t64, step64)
		g.op("setp.lt.u64 %s, %s, %s", more, t64, n)
	} else {
		g.op("add.s32 %s, %s, %s", t, t, step)
		g.op("setp.lt.u32 %s, %s, %s", more, t, n32)
	}
	g.op("@%s bra LOOP", more)
	g.label("DONE")
	g.op("ret")
}

// irLines returns the IR text of the plan, one line each, long lines cut,
// for the emitted modules' header comments.
func (p *Plan) irLines() []string {
	ls := strings.Split(strings.TrimRight(p.key, "\n"), "\n")
	for i, l := range ls {
		if len(l) > 200 {
			ls[i] = l[:200] + "..."
		}
	}
	return ls
}

// subMul emits r - i*c (32-bit) into a new register.
func (g *ptxGen) subMul(r, i string, c int64) string {
	iw, r2 := g.r(), g.r()
	g.op("mul.lo.s32 %s, %s, %d", iw, i, uint32(c))
	g.op("sub.s32 %s, %s, %s", r2, r, iw)
	return r2
}

// levelAdd emits a += the offset of instance i of level j.
func (g *ptxGen) levelAdd(p *Plan, j int, i, a, tab string) {
	if l := p.levels[j]; l.tab < 0 {
		i64 := g.rd()
		g.op("cvt.u64.u32 %s, %s", i64, i)
		g.op("mad.lo.s64 %s, %s, %d, %s", a, i64, l.stride, a)
	} else {
		g.op("add.s64 %s, %s, %s", a, a, g.tabLoad(tab, i, l.tab))
	}
}

// bodyAdd emits a += the typed offset of body byte rb (64-bit register;
// clobbered).
func (g *ptxGen) bodyAdd(p *Plan, rb, a, tab string) {
	if p.list {
		b := g.r()
		g.op("mov.u32 %s, 0", b)
		for s := p.listPad / 2; s >= 1; s /= 2 {
			c, pr, b2 := g.r(), g.p(), g.r()
			g.op("add.s32 %s, %s, %d", c, b, s)
			pre := g.tabLoad(tab, c, p.prePos)
			g.op("setp.le.s64 %s, %s, %s", pr, pre, rb)
			g.op("selp.b32 %s, %s, %s, %s", b2, c, b, pr)
			b = b2
		}
		off, pre := g.tabLoad(tab, b, p.offsPos), g.tabLoad(tab, b, p.prePos)
		g.op("add.s64 %s, %s, %s", a, a, off)
		g.op("sub.s64 %s, %s, %s", rb, rb, pre)
	}
	g.op("add.s64 %s, %s, %s", a, a, rb)
}

// move emits the copy of one word between typed+a and packed+po.
func (g *ptxGen) move(v variant, typed, packed, a, po string) {
	src, dst := g.rd(), g.rd()
	g.op("add.s64 %s, %s, %s", src, typed, a)
	g.op("add.s64 %s, %s, %s", dst, packed, po)
	from, to := src, dst
	if v.unpack {
		from, to = dst, src
	}
	switch v.w {
	case 16:
		x, y := g.rd(), g.rd()
		g.op("ld.global.nc.v2.u64 {%s, %s}, [%s]", x, y, from)
		g.op("st.global.v2.u64 [%s], {%s, %s}", to, x, y)
	case 8:
		x := g.rd()
		g.op("ld.global.nc.u64 %s, [%s]", x, from)
		g.op("st.global.u64 [%s], %s", to, x)
	default:
		x, ty := g.r(), map[int64]string{1: "u8", 2: "u16", 4: "u32"}[v.w]
		g.op("ld.global.nc.%s %s, [%s]", ty, x, from)
		g.op("st.global.%s [%s], %s", ty, to, x)
	}
}

// params emits the loads of the kernel parameters.
func (g *ptxGen) params() (typed, packed, tab, q0, n string) {
	typed, packed, tab, q0, n = g.rd(), g.rd(), g.rd(), g.rd(), g.rd()
	for i, name := range []string{"typed", "packed", "tab", "q0", "n"} {
		g.op("ld.param.u64 %s, [%s]", []string{typed, packed, tab, q0, n}[i], name)
	}
	for _, r := range []string{typed, packed, tab} {
		g.op("cvta.to.global.u64 %s, %s", r, r)
	}
	return
}

// kernel3 emits the 3-D launch's kernel: thread (x, y, z) of the grid
// moves the word x of the body instance y of the innermost level in row
// zlo + z (a row: one instance of the innermost level's parent, over all
// elements), if that word lies in the window; no loop, and no division
// for x and y.
func (g *ptxGen) kernel3(p *Plan, v variant) {
	m := p.vmath(v)
	typed, packed, tab, q0, n := g.params()
	id := func(dim string) string {
		tid, ntid, cta, out := g.r(), g.r(), g.r(), g.r()
		g.op("mov.u32 %s, %%tid.%s", tid, dim)
		g.op("mov.u32 %s, %%ntid.%s", ntid, dim)
		g.op("mov.u32 %s, %%ctaid.%s", cta, dim)
		g.op("mad.lo.u32 %s, %s, %s, %s", out, cta, ntid, tid)
		return out
	}
	x, y := id("x"), id("y")
	px, py := g.p(), g.p()
	g.op("setp.ge.u32 %s, %s, %d", px, x, uint32(m.d0))
	g.op("@%s bra DONE", px)
	g.op("setp.ge.u32 %s, %s, %d", py, y, uint32(m.d1))
	g.op("@%s bra DONE", py)
	q032, n32, cz, z := g.r(), g.r(), g.r(), g.r()
	g.op("cvt.u32.u64 %s, %s", q032, q0)
	g.op("cvt.u32.u64 %s, %s", n32, n)
	zlo := g.div32(q032, m.rows)
	g.op("mov.u32 %s, %%ctaid.z", cz)
	g.op("add.s32 %s, %s, %s", z, zlo, cz)
	zy, q, t, pt := g.r(), g.r(), g.r(), g.p()
	g.op("mad.lo.u32 %s, %s, %d, %s", zy, z, uint32(m.d1), y)
	g.op("mad.lo.u32 %s, %s, %d, %s", q, zy, uint32(m.d0), x)
	g.op("sub.s32 %s, %s, %s", t, q, q032)
	g.op("setp.ge.u32 %s, %s, %s", pt, t, n32)
	g.op("@%s bra DONE", pt)
	k := g.div32(z, m.per)
	rz := g.subMul(z, k, m.wpe/(m.d0*m.d1))
	k64, a := g.rd(), g.rd()
	g.op("cvt.u64.u32 %s, %s", k64, k)
	g.op("mul.lo.s64 %s, %s, %d", a, k64, p.extent)
	if p.disp != 0 {
		g.op("add.s64 %s, %s, %d", a, a, p.disp)
	}
	last := len(p.levels) - 1
	for j := 0; j < last; j++ {
		i := g.div32(rz, m.zl[j])
		rz = g.subMul(rz, i, m.zc[j])
		g.levelAdd(p, j, i, a, tab)
	}
	g.levelAdd(p, last, y, a, tab)
	rb, po := g.rd(), g.rd()
	g.op("mul.wide.u32 %s, %s, %d", rb, x, v.w)
	g.bodyAdd(p, rb, a, tab)
	g.op("mul.wide.u32 %s, %s, %d", po, t, v.w)
	g.move(v, typed, packed, a, po)
	g.label("DONE")
	g.op("ret")
}
