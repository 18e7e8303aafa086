package amd64

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

var r64 = []string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
var r32 = []string{"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"}
var r16 = []string{"ax", "cx", "dx", "bx", "sp", "bp", "si", "di", "r8w", "r9w", "r10w", "r11w", "r12w", "r13w", "r14w", "r15w"}
var r8n = []string{"al", "cl", "dl", "bl", "spl", "bpl", "sil", "dil", "r8b", "r9b", "r10b", "r11b", "r12b", "r13b", "r14b", "r15b"}

// gnuMem formats m as x86asm's GNU syntax does: a displacement encoded in 8
// bits prints signed, one encoded in 32 bits prints as an unsigned 32-bit
// number. scale is the EVEX disp8*N factor (1 otherwise).
// gnuMemAVX formats m as x86asm's VEX/EVEX decoder does (always signed).
func gnuMemAVX(m Mem) string { return gnuMemFmt(m, 1, true) }

func gnuMem(m Mem, scale ...int32) string {
	n := int32(1)
	if len(scale) > 0 {
		n = scale[0]
	}
	return gnuMemFmt(m, n, n != 1)
}

func gnuMemFmt(m Mem, n int32, signed bool) string {
	short := signed || m.Base != NoReg && m.Base != RIP && m.Disp%n == 0 && fits8(int64(m.Disp/n))
	var s strings.Builder
	if m.Disp != 0 || m.Base == RIP {
		if m.Disp < 0 && short {
			fmt.Fprintf(&s, "-%#x", -int64(m.Disp))
		} else {
			fmt.Fprintf(&s, "%#x", uint32(m.Disp))
		}
	}
	s.WriteByte('(')
	switch m.Base {
	case NoReg:
	case RIP:
		s.WriteString("%rip")
	default:
		s.WriteString("%" + r64[m.Base])
	}
	if m.Index != NoReg {
		fmt.Fprintf(&s, ",%%%s", r64[m.Index])
		if m.Scale > 1 {
			fmt.Fprintf(&s, ",%d", m.Scale)
		}
	}
	s.WriteByte(')')
	return s.String()
}

// decode disassembles exactly one instruction that must fill b.
func decode(t *testing.T, b []byte) string {
	t.Helper()
	in, err := x86asm.Decode(b, 64)
	if err != nil {
		t.Fatalf("% x: decode: %v", b, err)
	}
	if in.Len != len(b) {
		t.Fatalf("% x: decoded length %d, emitted %d (%s)", b, in.Len, len(b), x86asm.GNUSyntax(in, 0, nil))
	}
	// x86asm prints the no-index SIB byte of an R12 base as "%riz"; GNU
	// objdump prints plain (%r12). The bytes are the canonical encoding.
	s := x86asm.GNUSyntax(in, 0, nil)
	s = strings.ReplaceAll(s, "(%r12,%riz)", "(%r12)")
	return strings.ReplaceAll(s, "(%r12,%eiz)", "(%r12)")
}

func mems() []Mem {
	var ms []Mem
	for b := RAX; b <= R15; b++ {
		for _, d := range []int32{0, 8, -8, 127, -128, 128, 64, -192, 0x12345, -0x10000} {
			ms = append(ms, M(b, d))
		}
		for _, idx := range []Reg{RAX, RCX, R9, R12, R13, R15} {
			for _, sc := range []uint8{1, 2, 4, 8} {
				ms = append(ms, MI(b, idx, sc, 0), MI(b, idx, sc, 64), MI(b, idx, sc, 0x1000))
			}
		}
	}
	ms = append(ms, MI(NoReg, R12, 8, 0x100), MI(NoReg, RAX, 4, 0))
	return ms
}

type oracleCase struct {
	emit func(a *Asm)
	want string
}

func check(t *testing.T, cases []oracleCase) {
	t.Helper()
	for _, c := range cases {
		a := New(16)
		c.emit(a)
		b, err := a.Finish()
		if err != nil {
			t.Fatalf("%s: %v", c.want, err)
		}
		if got := decode(t, b); got != c.want {
			t.Errorf("% x: got %q want %q", b, got, c.want)
		}
	}
}

func TestOracleGPRMoves(t *testing.T) {
	var cs []oracleCase
	for _, m := range mems() {
		for r := RAX; r <= R15; r++ {
			m, r := m, r
			ms := gnuMem(m)
			cs = append(cs,
				oracleCase{func(a *Asm) { a.Load(1, r, m) }, fmt.Sprintf("movzbl %s,%%%s", ms, r32[r])},
				oracleCase{func(a *Asm) { a.Load(2, r, m) }, fmt.Sprintf("movzwl %s,%%%s", ms, r32[r])},
				oracleCase{func(a *Asm) { a.Load(4, r, m) }, fmt.Sprintf("mov %s,%%%s", ms, r32[r])},
				oracleCase{func(a *Asm) { a.Load(8, r, m) }, fmt.Sprintf("mov %s,%%%s", ms, r64[r])},
				oracleCase{func(a *Asm) { a.Store(1, m, r) }, fmt.Sprintf("mov %%%s,%s", r8n[r], ms)},
				oracleCase{func(a *Asm) { a.Store(2, m, r) }, fmt.Sprintf("mov %%%s,%s", r16[r], ms)},
				oracleCase{func(a *Asm) { a.Store(4, m, r) }, fmt.Sprintf("mov %%%s,%s", r32[r], ms)},
				oracleCase{func(a *Asm) { a.Store(8, m, r) }, fmt.Sprintf("mov %%%s,%s", r64[r], ms)},
				oracleCase{func(a *Asm) { a.Movnti(m, r) }, fmt.Sprintf("movnti %%%s,%s", r64[r], ms)},
				oracleCase{func(a *Asm) { a.Lea(r, m) }, fmt.Sprintf("lea %s,%%%s", ms, r64[r])},
				oracleCase{func(a *Asm) { a.LoadSX32(r, m) }, fmt.Sprintf("movsxd %s,%%%s", ms, r64[r])},
				oracleCase{func(a *Asm) { a.OpRM(ADD, r, m) }, fmt.Sprintf("add %s,%%%s", ms, r64[r])},
				oracleCase{func(a *Asm) { a.OpMR(SUB, m, r) }, fmt.Sprintf("sub %%%s,%s", r64[r], ms)},
			)
		}
		m := m
		ms := gnuMem(m)
		cs = append(cs,
			oracleCase{func(a *Asm) { a.Prefetcht0(m) }, "prefetcht0 " + ms},
			oracleCase{func(a *Asm) { a.DecM(m) }, "decq " + ms},
			oracleCase{func(a *Asm) { a.OpMI(ADD, m, 5) }, "addq $0x5," + ms},
			oracleCase{func(a *Asm) { a.OpMI(CMP, m, 0x1234) }, "cmpq $0x1234," + ms},
		)
	}
	check(t, cs)
}

func TestOracleVector(t *testing.T) {
	var cs []oracleCase
	for _, m := range mems() {
		for v := VReg(0); v < 32; v++ {
			m, v := m, v
			ms, ms64 := gnuMem(m), gnuMemAVX(m)
			if v < 16 {
				cs = append(cs,
					oracleCase{func(a *Asm) { a.VLoad(16, v, m) }, fmt.Sprintf("movdqu %s,%%xmm%d", ms, v)},
					oracleCase{func(a *Asm) { a.VStore(16, m, v) }, fmt.Sprintf("movdqu %%xmm%d,%s", v, ms)},
					oracleCase{func(a *Asm) { a.VStoreNT(16, m, v) }, fmt.Sprintf("movntdq %%xmm%d,%s", v, ms)},
					oracleCase{func(a *Asm) { a.VEX128 = true; a.VLoad(16, v, m) }, fmt.Sprintf("vmovdqu %s,%%xmm%d", ms64, v)},
					oracleCase{func(a *Asm) { a.VEX128 = true; a.VStore(16, m, v) }, fmt.Sprintf("vmovdqu %%xmm%d,%s", v, ms64)},
					oracleCase{func(a *Asm) { a.VEX128 = true; a.VStoreNT(16, m, v) }, fmt.Sprintf("vmovntdq %%xmm%d,%s", v, ms64)},
					oracleCase{func(a *Asm) { a.VLoad(32, v, m) }, fmt.Sprintf("vmovdqu %s,%%ymm%d", ms64, v)},
					oracleCase{func(a *Asm) { a.VStore(32, m, v) }, fmt.Sprintf("vmovdqu %%ymm%d,%s", v, ms64)},
					oracleCase{func(a *Asm) { a.VStoreNT(32, m, v) }, fmt.Sprintf("vmovntdq %%ymm%d,%s", v, ms64)},
				)
			}
			cs = append(cs,
				oracleCase{func(a *Asm) { a.VLoad(64, v, m) }, fmt.Sprintf("vmovdqu64 %s,%%zmm%d", ms64, v)},
				oracleCase{func(a *Asm) { a.VStore(64, m, v) }, fmt.Sprintf("vmovdqu64 %%zmm%d,%s", v, ms64)},
				oracleCase{func(a *Asm) { a.VStoreNT(64, m, v) }, fmt.Sprintf("vmovntdq %%zmm%d,%s", v, ms64)},
			)
		}
	}
	check(t, cs)
}

func TestOracleShuffle(t *testing.T) {
	var cs []oracleCase
	for d := VReg(0); d < 32; d++ {
		for _, s1 := range []VReg{0, 5, 8, 15, 16, 23, 24, 31} {
			for _, s2 := range []VReg{0, 7, 8, 13, 16, 20, 24, 31} {
				for _, imm := range []uint8{0x44, 0xee, 0x88, 0xdd, 0} {
					d, s1, s2, imm := d, s1, s2, imm
					cs = append(cs, oracleCase{func(a *Asm) { a.VShufI64x2(d, s1, s2, imm) },
						fmt.Sprintf("vshufi64x2 $%#x,%%zmm%d,%%zmm%d,%%zmm%d", imm, s2, s1, d)})
				}
			}
		}
	}
	check(t, cs)
}

func TestOracleArith(t *testing.T) {
	var cs []oracleCase
	ops := map[ALU]string{ADD: "add", SUB: "sub", CMP: "cmp", AND: "and", OR: "or", XOR: "xor"}
	for r := RAX; r <= R15; r++ {
		r := r
		for op, name := range ops {
			op, name := op, name
			for _, imm := range []int32{1, -1, 127, -128, 128, 0x7fffffff, -0x80000000} {
				imm := imm
				want := fmt.Sprintf("%s $%#x,%%%s", name, imm, r64[r])
				if imm < 0 {
					want = fmt.Sprintf("%s $-%#x,%%%s", name, -int64(imm), r64[r])
				}
				cs = append(cs, oracleCase{func(a *Asm) { a.OpRI(op, r, imm) }, want})
			}
			for s := RAX; s <= R15; s++ {
				s := s
				cs = append(cs, oracleCase{func(a *Asm) { a.OpRR(op, r, s) }, fmt.Sprintf("%s %%%s,%%%s", name, r64[s], r64[r])})
			}
		}
		for s := RAX; s <= R15; s++ {
			s := s
			cs = append(cs,
				oracleCase{func(a *Asm) { a.MovRR(r, s) }, fmt.Sprintf("mov %%%s,%%%s", r64[s], r64[r])},
				oracleCase{func(a *Asm) { a.Test(r, s) }, fmt.Sprintf("test %%%s,%%%s", r64[s], r64[r])},
				oracleCase{func(a *Asm) { a.Cmov(CondB, r, s) }, fmt.Sprintf("cmovb %%%s,%%%s", r64[s], r64[r])},
				oracleCase{func(a *Asm) { a.Cmov(CondG, r, s) }, fmt.Sprintf("cmovg %%%s,%%%s", r64[s], r64[r])},
			)
		}
		cs = append(cs,
			oracleCase{func(a *Asm) { a.Shl(r, 32) }, "shl $0x20,%" + r64[r]},
			oracleCase{func(a *Asm) { a.Shr(r, 32) }, "shr $0x20,%" + r64[r]},
			oracleCase{func(a *Asm) { a.Shl(r, 1) }, "shl $0x1,%" + r64[r]},
			oracleCase{func(a *Asm) { a.Shr(r, 63) }, "shr $0x3f,%" + r64[r]},
			oracleCase{func(a *Asm) { a.Inc(r) }, "inc %" + r64[r]},
			oracleCase{func(a *Asm) { a.Dec(r) }, "dec %" + r64[r]},
			oracleCase{func(a *Asm) { a.MovImm(r, 0) }, fmt.Sprintf("xor %%%s,%%%s", r32[r], r32[r])},
			oracleCase{func(a *Asm) { a.MovImm(r, 0x89abcdef) }, fmt.Sprintf("mov $-0x76543211,%%%s", r32[r])},
			oracleCase{func(a *Asm) { a.MovImm(r, -5) }, fmt.Sprintf("mov $-0x5,%%%s", r64[r])},
			oracleCase{func(a *Asm) { a.MovImm(r, 0x123456789a) }, fmt.Sprintf("mov $0x123456789a,%%%s", r64[r])},
		)
	}
	cs = append(cs,
		oracleCase{func(a *Asm) { a.Ret() }, "retq"},
		oracleCase{func(a *Asm) { a.RepMovsb() }, "rep movsb %ds:(%rsi),%es:(%rdi)"},
		oracleCase{func(a *Asm) { a.Vzeroupper() }, "vzeroupper"},
		oracleCase{func(a *Asm) { a.Sfence() }, "sfence"},
		oracleCase{func(a *Asm) { a.Ud2() }, "ud2"},
	)
	check(t, cs)
}

// TestOracleJumps checks rel8 and rel32 forms and that fixups land on the
// bound label.
func TestOracleJumps(t *testing.T) {
	conds := map[Cond]string{CondE: "je", CondNE: "jne", CondB: "jb", CondAE: "jae", CondL: "jl", CondGE: "jge", CondA: "ja", CondBE: "jbe"}
	for c, name := range conds {
		// backward near: rel8
		a := New(64)
		top := a.NewLabel()
		a.Bind(top)
		a.Inc(RAX)
		a.Jcc(c, top)
		b, err := a.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if got := decode(t, b[3:]); got != name+" .-0x5" {
			t.Errorf("backward %s: %q", name, got)
		}
		// forward: rel32 fixed up to the label.
		a = New(64)
		fwd := a.NewLabel()
		a.Jcc(c, fwd)
		for i := 0; i < 10; i++ {
			a.Inc(RAX)
		}
		a.Bind(fwd)
		b, _ = a.Finish()
		if got := decode(t, b[:6]); got != name+" .+0x1e" {
			t.Errorf("forward %s: %q", name, got)
		}
		// backward far: rel32
		a = New(512)
		top = a.NewLabel()
		a.Bind(top)
		for i := 0; i < 60; i++ {
			a.Inc(RAX)
		}
		a.Jcc(c, top)
		b, _ = a.Finish()
		if got := decode(t, b[180:]); got != name+" .-0xba" {
			t.Errorf("backward far %s: %q", name, got)
		}
	}
	a := New(64)
	l := a.NewLabel()
	a.Jmp(l)
	a.Bind(l)
	a.Jmp(l)
	a.LeaLabel(RCX, l)
	b, _ := a.Finish()
	if got := decode(t, b[:5]); got != "jmpq .+0x0" {
		t.Errorf("jmp fwd: %q", got)
	}
	if got := decode(t, b[5:7]); got != "jmp .-0x2" {
		t.Errorf("jmp back: %q", got)
	}
	if got := decode(t, b[7:]); got != "lea 0xfffffff7(%rip),%rcx" {
		t.Errorf("lea label: %q", got)
	}
}

// TestGolden pins exact bytes for a few forms (checked with GNU as).
func TestGolden(t *testing.T) {
	golden := []struct {
		emit func(a *Asm)
		hex  []byte
		asm  string
	}{
		{func(a *Asm) { a.Load(8, RAX, M(RSI, 0x10)) }, []byte{0x48, 0x8b, 0x46, 0x10}, "mov 0x10(%rsi),%rax"},
		{func(a *Asm) { a.Store(1, M(RDI, 0), RSI) }, []byte{0x40, 0x88, 0x37}, "mov %sil,(%rdi)"},
		{func(a *Asm) { a.Load(4, R13, M(R13, 0)) }, []byte{0x45, 0x8b, 0x6d, 0x00}, "mov 0x0(%r13),%r13d"},
		{func(a *Asm) { a.VLoad(32, 1, M(R12, 32)) }, []byte{0xc4, 0xc1, 0x7e, 0x6f, 0x4c, 0x24, 0x20}, "vmovdqu 0x20(%r12),%ymm1"},
		{func(a *Asm) { a.VStore(64, M(RDI, 128), 17) }, []byte{0x62, 0xe1, 0xfe, 0x48, 0x7f, 0x4f, 0x02}, "vmovdqu64 %zmm17,0x80(%rdi)"},
		{func(a *Asm) { a.VStoreNT(32, M(RDI, 0), 0) }, []byte{0xc5, 0xfd, 0xe7, 0x07}, "vmovntdq %ymm0,(%rdi)"},
		{func(a *Asm) { a.Prefetcht0(M(RSI, 0x100)) }, []byte{0x0f, 0x18, 0x8e, 0x00, 0x01, 0x00, 0x00}, "prefetcht0 0x100(%rsi)"},
		{func(a *Asm) { a.Shl(R9, 32) }, []byte{0x49, 0xc1, 0xe1, 0x20}, "shl $0x20,%r9"},
		{func(a *Asm) { a.Shr(RAX, 32) }, []byte{0x48, 0xc1, 0xe8, 0x20}, "shr $0x20,%rax"},
		{func(a *Asm) { a.VShufI64x2(9, 17, 31, 0x44) }, []byte{0x62, 0x13, 0xf5, 0x40, 0x43, 0xcf, 0x44}, "vshufi64x2 $0x44,%zmm31,%zmm17,%zmm9"},
		{func(a *Asm) { a.VShufI64x2(20, 24, 2, 0xdd) }, []byte{0x62, 0xe3, 0xbd, 0x40, 0x43, 0xe2, 0xdd}, "vshufi64x2 $0xdd,%zmm2,%zmm24,%zmm20"},
	}
	for _, g := range golden {
		a := New(16)
		g.emit(a)
		b, err := a.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, g.hex) {
			t.Errorf("%s: got % x want % x", g.asm, b, g.hex)
		}
	}
}

func TestErrors(t *testing.T) {
	for name, f := range map[string]func(a *Asm){
		"scale":   func(a *Asm) { a.Load(8, RAX, MI(RSI, RCX, 3, 0)) },
		"rsp idx": func(a *Asm) { a.Load(8, RAX, MI(RSI, RSP, 1, 0)) },
		"width":   func(a *Asm) { a.Load(3, RAX, M(RSI, 0)) },
		"vwidth":  func(a *Asm) { a.VLoad(8, 0, M(RSI, 0)) },
		"ymm16":   func(a *Asm) { a.VLoad(32, 16, M(RSI, 0)) },
		"unbound": func(a *Asm) { a.Jmp(a.NewLabel()) },
		"badreg":  func(a *Asm) { a.Inc(Reg(20)) },
		"rebind":  func(a *Asm) { l := a.NewLabel(); a.Bind(l); a.Bind(l) },
		"shift0":  func(a *Asm) { a.Shl(RAX, 0) },
		"shift64": func(a *Asm) { a.Shr(RAX, 64) },
	} {
		a := New(16)
		f(a)
		if _, err := a.Finish(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestOracleGather(t *testing.T) {
	var cs []oracleCase
	for b := RAX; b <= R15; b++ {
		for _, v := range []VReg{0, 1, 7, 8, 15, 16, 31} {
			for _, ix := range []VReg{2, 9, 17, 30} {
				if ix == v {
					continue
				}
				b, v, ix := b, v, ix
				cs = append(cs,
					oracleCase{func(a *Asm) { a.VGather(4, v, b, ix, 1, 1) }, fmt.Sprintf("vpgatherdd %s,%%zmm%d {%%k1}", vsib(b, "zmm", ix, 1), v)},
					oracleCase{func(a *Asm) { a.VGather(8, v, b, ix, 4, 2) }, fmt.Sprintf("vpgatherdq %s,%%zmm%d {%%k2}", vsib(b, "ymm", ix, 4), v)},
				)
			}
		}
	}
	cs = append(cs, oracleCase{func(a *Asm) { a.Kxnorw(1, 1, 1) }, "kxnorw %k1,%k1,%k1"},
		oracleCase{func(a *Asm) { a.Kxnorw(3, 5, 6) }, "kxnorw %k6,%k5,%k3"})
	check(t, cs)
}

func vsib(b Reg, kind string, ix VReg, scale int) string {
	s := "(%" + r64[b]
	s += ",%" + kind + fmt.Sprint(ix)
	if scale > 1 {
		s += fmt.Sprintf(",%d", scale)
	}
	return s + ")"
}
