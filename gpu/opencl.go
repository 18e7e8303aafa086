package gpu

import (
	"fmt"
	"strings"
)

// The OpenCL C emitter: the same kernels as the PTX emitter (same names,
// same arithmetic), in OpenCL C 1.2 for every other
// OpenCL device (AMD and Intel GPUs, CPUs through pocl). Buffers are
// cl_mem objects, so the typed origin and the packed window are byte
// offsets into them:
//
//	__kernel void NAME(__global uchar *typed, long toff,
//	                   __global uchar *packed, long poff,
//	                   __global const long *tab, ulong q0, ulong n)

// OpenCL returns the OpenCL C program of the plan for word size w (a power
// of two not above MaxWord; w ≤ 0 means MaxWord): pack and unpack for the
// 3-D launch and the 1-D launch with 32- and 64-bit element splits.
func (p *Plan) OpenCL(w int64) (string, error) {
	w, err := p.checkWord(w)
	if err != nil {
		return "", err
	}
	return p.source(srcKey{lang: langOpenCL, v: variant{w: w}, all: true}), nil
}

var clWord = map[int64]string{1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}

// emitOpenCL returns an OpenCL C program holding the kernels ks, in that
// order.
func (p *Plan) emitOpenCL(ks []variant) string {
	var b strings.Builder
	b.WriteString("/* weft gpu kernels, generated from the datatype IR:\n")
	for _, l := range p.irLines() {
		b.WriteString(" *   " + strings.ReplaceAll(l, "*/", "* /") + "\n")
	}
	b.WriteString(" */\n")
	for _, k := range ks {
		p.clKernel(&b, k)
	}
	return b.String()
}

func (p *Plan) clKernel(b *strings.Builder, v variant) {
	m := p.vmath(v)
	line := func(f string, a ...any) { fmt.Fprintf(b, "\t\t"+f+"\n", a...) }
	fmt.Fprintf(b, "\n__kernel void %s(__global uchar *typed, long toff, __global uchar *packed, long poff,\n\t\t__global const long *tab, ulong q0, ulong n)\n{\n", p.kernelName(v))
	div32 := func(x string, mg magic) string {
		switch {
		case mg.d == 1:
			return x
		case mg.pow2():
			return fmt.Sprintf("(%s >> %d)", x, mg.shift)
		}
		return fmt.Sprintf("(mul_hi(%s, (uint)%dU) >> %d)", x, uint32(mg.m), mg.shift)
	}
	if v.grid3 {
		p.clKernel3(b, m, line, div32)
		return
	}
	if v.wide {
		b.WriteString("\tfor (ulong t = get_global_id(0); t < n; t += get_global_size(0)) {\n")
		line("ulong q = q0 + t;")
		switch {
		case m.elem.d == 1:
			line("ulong k = q;")
		case m.elem.pow2():
			line("ulong k = q >> %d;", m.elem.shift)
		default:
			line("ulong k = mul_hi(q, (ulong)%dUL) >> %d;", m.elem.m, m.elem.shift)
		}
		line("uint r = (uint)(q - k * %dUL);", m.wpe)
	} else {
		b.WriteString("\tuint n32 = (uint)n, q032 = (uint)q0, step = (uint)get_global_size(0);\n")
		b.WriteString("\tfor (uint t = (uint)get_global_id(0); t < n32; t += step) {\n")
		line("uint q = q032 + t;")
		line("uint k = %s;", div32("q", m.elem))
		line("uint r = q - k * %dU;", uint32(m.wpe))
	}
	line("long a = (long)k * (%dL) + (%dL);", p.extent, p.disp)
	for j := range p.levels {
		line("{")
		if m.cw[j] == 1 {
			line("\tuint i = r; r = 0;")
		} else {
			line("\tuint i = %s; r -= i * %dU;", div32("r", m.lv[j]), uint32(m.cw[j]))
		}
		line("\t%s", clLevel(p, j, "i"))
		line("}")
	}
	line("long rb = (long)r * %d;", v.w)
	clBody(p, line)
	clMove(v, line)
	b.WriteString("\t}\n}\n")
}

// clLevel is the statement adding the offset of instance i of level j.
func clLevel(p *Plan, j int, i string) string {
	if l := p.levels[j]; l.tab >= 0 {
		return fmt.Sprintf("a += tab[%d + (ulong)%s];", l.tab, i)
	}
	return fmt.Sprintf("a += (long)%s * (%dL);", i, p.levels[j].stride)
}

// clBody adds the typed offset of body byte rb to a.
func clBody(p *Plan, line func(string, ...any)) {
	if p.list {
		line("uint b = 0;")
		for s := p.listPad / 2; s >= 1; s /= 2 {
			line("b = tab[%d + (ulong)(b + %d)] <= rb ? b + %d : b;", p.prePos, s, s)
		}
		line("a += tab[%d + (ulong)b] + rb - tab[%d + (ulong)b];", p.offsPos, p.prePos)
	} else {
		line("a += rb;")
	}
}

// clMove copies the word between typed+toff+a and packed word t.
func clMove(v variant, line func(string, ...any)) {
	ty := clWord[v.w]
	tp := fmt.Sprintf("(__global %s *)(typed + toff + a)", ty)
	pp := fmt.Sprintf("(__global %s *)(packed + poff + (long)t * %d)", ty, v.w)
	if v.unpack {
		line("*%s = *%s;", tp, pp)
	} else {
		line("*%s = *%s;", pp, tp)
	}
}

// clKernel3 is the 3-D launch's kernel (see ptxGen.kernel3).
func (p *Plan) clKernel3(b *strings.Builder, m *vmath, line func(string, ...any), div32 func(string, magic) string) {
	b.WriteString("\tuint x = (uint)get_global_id(0), y = (uint)get_global_id(1);\n")
	fmt.Fprintf(b, "\tif (x >= %dU || y >= %dU)\n\t\treturn;\n", uint32(m.d0), uint32(m.d1))
	b.WriteString("\tuint q032 = (uint)q0;\n")
	fmt.Fprintf(b, "\tuint z = %s + (uint)get_global_id(2);\n", div32("q032", m.rows))
	fmt.Fprintf(b, "\tuint t = (z * %dU + y) * %dU + x - q032;\n", uint32(m.d1), uint32(m.d0))
	b.WriteString("\tif (t >= (uint)n)\n\t\treturn;\n\t{\n")
	line("uint k = %s;", div32("z", m.per))
	line("uint rz = z - k * %dU;", uint32(m.wpe/(m.d0*m.d1)))
	line("long a = (long)k * (%dL) + (%dL);", p.extent, p.disp)
	last := len(p.levels) - 1
	for j := 0; j < last; j++ {
		line("{")
		line("\tuint i = %s; rz -= i * %dU;", div32("rz", m.zl[j]), uint32(m.zc[j]))
		line("\t%s", clLevel(p, j, "i"))
		line("}")
	}
	line("%s", clLevel(p, last, "y"))
	line("long rb = (long)x * %d;", m.v.w)
	clBody(p, line)
	clMove(m.v, line)
	b.WriteString("\t}\n}\n")
}
