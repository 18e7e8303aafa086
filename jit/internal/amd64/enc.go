// Package amd64 is a small x86-64 machine-code encoder: exactly the instruction
// forms the weft datatype compiler emits (moves of 1 to 64 bytes through
// general, SSE, AVX and AVX-512 registers, non-temporal stores, prefetch,
// integer arithmetic for loop control, conditional and unconditional jumps with
// label fixups, lea, rep movsb, vzeroupper, sfence and ret).
//
// The encoder never fails on a single instruction: an operand it cannot encode
// (a register out of range, a scale that is not 1, 2, 4 or 8) is recorded and
// returned by Finish, so code generation stays straight-line. Every form is
// checked against golang.org/x/arch/x86/x86asm in the package tests.
package amd64

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Reg is a general-purpose 64-bit register number (RAX=0 … R15=15).
type Reg uint8

// General-purpose registers.
const (
	RAX Reg = iota
	RCX
	RDX
	RBX
	RSP
	RBP
	RSI
	RDI
	R8
	R9
	R10
	R11
	R12
	R13
	R14
	R15
	// NoReg marks an absent base or index register in a Mem operand.
	NoReg Reg = 0xff
	// RIP as a Mem base selects RIP-relative addressing.
	RIP Reg = 0xfe
)

// VReg is a vector register number (X0/Y0/Z0 = 0 … 31). Registers 16–31 need
// AVX-512.
type VReg uint8

// Mem is a memory operand [Base + Index*Scale + Disp]. Base may be NoReg
// (absolute disp32) or RIP (RIP-relative; Disp is then relative to the end of
// the instruction, or use a label with LeaLabel).
type Mem struct {
	Base  Reg
	Index Reg // NoReg when absent
	Scale uint8
	Disp  int32
}

// M returns the operand [base+disp].
func M(base Reg, disp int32) Mem { return Mem{Base: base, Index: NoReg, Scale: 1, Disp: disp} }

// MI returns the operand [base+index*scale+disp].
func MI(base, index Reg, scale uint8, disp int32) Mem {
	return Mem{Base: base, Index: index, Scale: scale, Disp: disp}
}

// Cond is a condition code for Jcc and CMOVcc (the low nibble of the opcode).
type Cond uint8

// Condition codes.
const (
	CondO  Cond = 0x0
	CondNO Cond = 0x1
	CondB  Cond = 0x2 // below (unsigned <), carry
	CondAE Cond = 0x3 // above or equal (unsigned >=)
	CondE  Cond = 0x4 // equal, zero
	CondNE Cond = 0x5 // not equal, not zero
	CondBE Cond = 0x6
	CondA  Cond = 0x7
	CondS  Cond = 0x8
	CondNS Cond = 0x9
	CondL  Cond = 0xc // signed <
	CondGE Cond = 0xd
	CondLE Cond = 0xe
	CondG  Cond = 0xf
)

// Label is a position in the code, bound once with Bind.
type Label int32

type fixup struct {
	at    int   // offset of the rel32 field
	label Label // target
	end   int   // offset of the end of the instruction (rel base)
}

// Asm accumulates machine code. The zero value is not usable; call New.
type Asm struct {
	b      []byte
	labels []int // -1 = unbound
	fix    []fixup
	err    error

	// VEX128 makes 16-byte vector moves VEX-encoded (vmovdqu xmm,
	// vmovntdq xmm) instead of legacy SSE (movdqu, movntdq). Code that also
	// uses 32- or 64-byte moves must set it: on Intel cores a legacy SSE
	// instruction after a VEX or EVEX write of the upper register halves
	// pays a state transition or a merge with the dirty upper half (a
	// 2000-block body mixing 16- and 32-byte moves ran 20 times slower).
	// VEX.128 zeroes the upper halves, so there is nothing to merge.
	// Requires AVX.
	VEX128 bool
}

// New returns an assembler with room for capHint bytes.
func New(capHint int) *Asm { return &Asm{b: make([]byte, 0, capHint)} }

// Reset empties a for reuse, keeping its buffers.
func (a *Asm) Reset() {
	a.b = a.b[:0]
	a.labels = a.labels[:0]
	a.fix = a.fix[:0]
	a.err = nil
	a.VEX128 = false
}

// Len is the number of bytes emitted so far.
func (a *Asm) Len() int { return len(a.b) }

// Bytes returns the code emitted so far (fixups are applied by Finish).
func (a *Asm) Bytes() []byte { return a.b }

func (a *Asm) fail(format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("amd64: "+format, args...)
	}
}

// ErrUnbound is returned by Finish when a jump targets a label never bound.
var ErrUnbound = errors.New("amd64: jump to unbound label")

// NewLabel allocates an unbound label.
func (a *Asm) NewLabel() Label {
	a.labels = append(a.labels, -1)
	return Label(len(a.labels) - 1)
}

// Bind binds l to the current position.
func (a *Asm) Bind(l Label) {
	if int(l) >= len(a.labels) || a.labels[l] >= 0 {
		a.fail("label %d bound twice or unknown", l)
		return
	}
	a.labels[l] = len(a.b)
}

// Finish resolves label fixups and returns the code, or the first encoding
// error.
func (a *Asm) Finish() ([]byte, error) {
	if a.err != nil {
		return nil, a.err
	}
	for _, f := range a.fix {
		t := a.labels[f.label]
		if t < 0 {
			return nil, fmt.Errorf("%w %d", ErrUnbound, f.label)
		}
		binary.LittleEndian.PutUint32(a.b[f.at:], uint32(int32(t-f.end)))
	}
	return a.b, nil
}

func (a *Asm) emit(b ...byte) { a.b = append(a.b, b...) }

func (a *Asm) u32(v uint32) { a.b = binary.LittleEndian.AppendUint32(a.b, v) }

func (a *Asm) u64(v uint64) { a.b = binary.LittleEndian.AppendUint64(a.b, v) }

func fits8(v int64) bool { return v >= -128 && v <= 127 }

func (a *Asm) checkReg(r Reg) {
	if r > R15 {
		a.fail("bad register %d", r)
	}
}

// rex emits a REX prefix when needed. w: REX.W; r: ModRM.reg; x: SIB.index;
// b: ModRM.rm / SIB.base / opcode reg. force emits 0x40 even when no bit is set
// (byte registers SPL, BPL, SIL, DIL).
func (a *Asm) rex(w bool, r, x, b byte, force bool) {
	v := byte(0x40)
	if w {
		v |= 8
	}
	v |= (r >> 3 & 1) << 2
	v |= (x >> 3 & 1) << 1
	v |= b >> 3 & 1
	if v != 0x40 || force {
		a.emit(v)
	}
}

// memBits returns the REX.X and REX.B register numbers a memory operand uses.
func memBits(m Mem) (x, b byte) {
	if m.Index != NoReg {
		x = byte(m.Index)
	}
	if m.Base != NoReg && m.Base != RIP {
		b = byte(m.Base)
	}
	return
}

// modrmMem emits ModRM (+SIB, +disp) for reg field r and memory operand m.
// dispScale is the EVEX disp8*N compression factor (1 for legacy and VEX).
func (a *Asm) modrmMem(r byte, m Mem, dispScale int32) {
	r &= 7
	if m.Index == RSP {
		a.fail("rsp cannot be an index register")
		return
	}
	if m.Base != NoReg && m.Base != RIP {
		a.checkReg(m.Base)
	}
	if m.Index != NoReg {
		a.checkReg(m.Index)
	}
	var ss byte
	switch m.Scale {
	case 0, 1:
	case 2:
		ss = 1
	case 4:
		ss = 2
	case 8:
		ss = 3
	default:
		a.fail("bad scale %d", m.Scale)
	}
	if m.Base == RIP {
		if m.Index != NoReg {
			a.fail("rip-relative with index")
		}
		a.emit(r<<3 | 5)
		a.u32(uint32(m.Disp))
		return
	}
	if m.Base == NoReg { // absolute disp32 (with optional index) via SIB
		idx := byte(4)
		if m.Index != NoReg {
			idx = byte(m.Index) & 7
		}
		a.emit(r<<3|4, ss<<6|idx<<3|5)
		a.u32(uint32(m.Disp))
		return
	}
	base := byte(m.Base) & 7
	var mod byte
	var d8 int64
	switch {
	case m.Disp == 0 && base != 5: // RBP/R13 need an explicit displacement
		mod = 0
	case m.Disp%dispScale == 0 && fits8(int64(m.Disp/dispScale)):
		mod = 1
		d8 = int64(m.Disp / dispScale)
	default:
		mod = 2
	}
	if m.Index != NoReg || base == 4 { // SIB needed
		idx := byte(4)
		if m.Index != NoReg {
			idx = byte(m.Index) & 7
		}
		a.emit(mod<<6|r<<3|4, ss<<6|idx<<3|base)
	} else {
		a.emit(mod<<6 | r<<3 | base)
	}
	switch mod {
	case 1:
		a.emit(byte(int8(d8)))
	case 2:
		a.u32(uint32(m.Disp))
	}
}

func (a *Asm) modrmReg(r, rm byte) { a.emit(0xc0 | (r&7)<<3 | rm&7) }

// ---- general-purpose moves ----

// Load emits a zero-extending load of width bytes (1, 2, 4 or 8) from m into
// dst: movzx for 1 and 2, mov r32 for 4, mov r64 for 8.
func (a *Asm) Load(width int, dst Reg, m Mem) {
	a.checkReg(dst)
	x, b := memBits(m)
	switch width {
	case 1, 2:
		a.rex(false, byte(dst), x, b, false)
		op := byte(0xb6)
		if width == 2 {
			op = 0xb7
		}
		a.emit(0x0f, op)
	case 4:
		a.rex(false, byte(dst), x, b, false)
		a.emit(0x8b)
	case 8:
		a.rex(true, byte(dst), x, b, false)
		a.emit(0x8b)
	default:
		a.fail("load width %d", width)
		return
	}
	a.modrmMem(byte(dst), m, 1)
}

// Store emits a store of the low width bytes (1, 2, 4 or 8) of src to m.
func (a *Asm) Store(width int, m Mem, src Reg) {
	a.checkReg(src)
	x, b := memBits(m)
	switch width {
	case 1:
		a.rex(false, byte(src), x, b, src >= RSP && src <= RDI)
		a.emit(0x88)
	case 2:
		a.emit(0x66)
		a.rex(false, byte(src), x, b, false)
		a.emit(0x89)
	case 4:
		a.rex(false, byte(src), x, b, false)
		a.emit(0x89)
	case 8:
		a.rex(true, byte(src), x, b, false)
		a.emit(0x89)
	default:
		a.fail("store width %d", width)
		return
	}
	a.modrmMem(byte(src), m, 1)
}

// LoadSX32 emits movsxd dst, dword m (sign-extending a 32-bit table entry).
func (a *Asm) LoadSX32(dst Reg, m Mem) {
	a.checkReg(dst)
	x, b := memBits(m)
	a.rex(true, byte(dst), x, b, false)
	a.emit(0x63)
	a.modrmMem(byte(dst), m, 1)
}

// MovRR emits mov dst, src (64-bit).
func (a *Asm) MovRR(dst, src Reg) {
	a.checkReg(dst)
	a.checkReg(src)
	a.rex(true, byte(src), 0, byte(dst), false)
	a.emit(0x89)
	a.modrmReg(byte(src), byte(dst))
}

// MovImm loads a 64-bit constant into dst with the shortest encoding: xor for
// zero, mov r32 for values below 2^32, sign-extended imm32, else imm64.
func (a *Asm) MovImm(dst Reg, v int64) {
	a.checkReg(dst)
	switch {
	case v == 0:
		a.rex(false, byte(dst), 0, byte(dst), false)
		a.emit(0x31)
		a.modrmReg(byte(dst), byte(dst))
	case v > 0 && v <= 0xffffffff:
		a.rex(false, 0, 0, byte(dst), false)
		a.emit(0xb8 + byte(dst)&7)
		a.u32(uint32(v))
	case v >= -1<<31 && v < 1<<31:
		a.rex(true, 0, 0, byte(dst), false)
		a.emit(0xc7)
		a.modrmReg(0, byte(dst))
		a.u32(uint32(v))
	default:
		a.rex(true, 0, 0, byte(dst), false)
		a.emit(0xb8 + byte(dst)&7)
		a.u64(uint64(v))
	}
}

// Lea emits lea dst, m.
func (a *Asm) Lea(dst Reg, m Mem) {
	a.checkReg(dst)
	x, b := memBits(m)
	a.rex(true, byte(dst), x, b, false)
	a.emit(0x8d)
	a.modrmMem(byte(dst), m, 1)
}

// LeaLabel emits lea dst, [rip+label]: the address of a bound-later label
// (used for data tables placed after the code).
func (a *Asm) LeaLabel(dst Reg, l Label) {
	a.checkReg(dst)
	a.rex(true, byte(dst), 0, 0, false)
	a.emit(0x8d, (byte(dst)&7)<<3|5)
	a.fix = append(a.fix, fixup{at: len(a.b), label: l, end: len(a.b) + 4})
	a.u32(0)
}

// ---- arithmetic ----

// ALU operation selectors (the ModRM.reg extension of opcodes 81/83 and the
// base opcode of the r/m,reg form).
type ALU uint8

// ALU operations.
const (
	ADD ALU = 0
	OR  ALU = 1
	AND ALU = 4
	SUB ALU = 5
	XOR ALU = 6
	CMP ALU = 7
)

// OpRI emits op dst, imm (64-bit operand size, imm8 when it fits).
func (a *Asm) OpRI(op ALU, dst Reg, imm int32) {
	a.checkReg(dst)
	a.rex(true, 0, 0, byte(dst), false)
	if fits8(int64(imm)) {
		a.emit(0x83)
		a.modrmReg(byte(op), byte(dst))
		a.emit(byte(int8(imm)))
		return
	}
	a.emit(0x81)
	a.modrmReg(byte(op), byte(dst))
	a.u32(uint32(imm))
}

// OpMI emits op qword m, imm.
func (a *Asm) OpMI(op ALU, m Mem, imm int32) {
	x, b := memBits(m)
	a.rex(true, 0, x, b, false)
	if fits8(int64(imm)) {
		a.emit(0x83)
		a.modrmMem(byte(op), m, 1)
		a.emit(byte(int8(imm)))
		return
	}
	a.emit(0x81)
	a.modrmMem(byte(op), m, 1)
	a.u32(uint32(imm))
}

// OpRR emits op dst, src (64-bit).
func (a *Asm) OpRR(op ALU, dst, src Reg) {
	a.checkReg(dst)
	a.checkReg(src)
	a.rex(true, byte(src), 0, byte(dst), false)
	a.emit(byte(op)<<3 | 1)
	a.modrmReg(byte(src), byte(dst))
}

// OpRM emits op dst, qword m (64-bit).
func (a *Asm) OpRM(op ALU, dst Reg, m Mem) {
	a.checkReg(dst)
	x, b := memBits(m)
	a.rex(true, byte(dst), x, b, false)
	a.emit(byte(op)<<3 | 3)
	a.modrmMem(byte(dst), m, 1)
}

// OpMR emits op qword m, src (64-bit).
func (a *Asm) OpMR(op ALU, m Mem, src Reg) {
	a.checkReg(src)
	x, b := memBits(m)
	a.rex(true, byte(src), x, b, false)
	a.emit(byte(op)<<3 | 1)
	a.modrmMem(byte(src), m, 1)
}

// Inc emits inc r64.
func (a *Asm) Inc(r Reg) {
	a.checkReg(r)
	a.rex(true, 0, 0, byte(r), false)
	a.emit(0xff)
	a.modrmReg(0, byte(r))
}

// Dec emits dec r64.
func (a *Asm) Dec(r Reg) {
	a.checkReg(r)
	a.rex(true, 0, 0, byte(r), false)
	a.emit(0xff)
	a.modrmReg(1, byte(r))
}

// DecM emits dec qword m.
func (a *Asm) DecM(m Mem) {
	x, b := memBits(m)
	a.rex(true, 0, x, b, false)
	a.emit(0xff)
	a.modrmMem(1, m, 1)
}

// Shl emits shl r64, imm (imm 1–63).
func (a *Asm) Shl(r Reg, imm uint8) { a.shift(4, r, imm) }

// Shr emits shr r64, imm (imm 1–63; a logical shift).
func (a *Asm) Shr(r Reg, imm uint8) { a.shift(5, r, imm) }

func (a *Asm) shift(ext byte, r Reg, imm uint8) {
	a.checkReg(r)
	if imm == 0 || imm > 63 {
		a.fail("shift count %d", imm)
		return
	}
	a.rex(true, 0, 0, byte(r), false)
	a.emit(0xc1)
	a.modrmReg(ext, byte(r))
	a.emit(imm)
}

// Test emits test a, b (64-bit).
func (a *Asm) Test(r1, r2 Reg) {
	a.checkReg(r1)
	a.checkReg(r2)
	a.rex(true, byte(r2), 0, byte(r1), false)
	a.emit(0x85)
	a.modrmReg(byte(r2), byte(r1))
}

// Cmov emits cmovcc dst, src (64-bit).
func (a *Asm) Cmov(c Cond, dst, src Reg) {
	a.checkReg(dst)
	a.checkReg(src)
	a.rex(true, byte(dst), 0, byte(src), false)
	a.emit(0x0f, 0x40|byte(c))
	a.modrmReg(byte(dst), byte(src))
}

// ---- control flow ----

// Jcc emits a conditional jump to l: rel8 when l is already bound and near,
// otherwise rel32 with a fixup.
func (a *Asm) Jcc(c Cond, l Label) {
	if t := a.labels[l]; t >= 0 {
		if d := t - (len(a.b) + 2); fits8(int64(d)) {
			a.emit(0x70|byte(c), byte(int8(d)))
			return
		}
	}
	a.emit(0x0f, 0x80|byte(c))
	a.fix = append(a.fix, fixup{at: len(a.b), label: l, end: len(a.b) + 4})
	a.u32(0)
}

// Jmp emits an unconditional jump to l (rel8 when possible, else rel32).
func (a *Asm) Jmp(l Label) {
	if t := a.labels[l]; t >= 0 {
		if d := t - (len(a.b) + 2); fits8(int64(d)) {
			a.emit(0xeb, byte(int8(d)))
			return
		}
	}
	a.emit(0xe9)
	a.fix = append(a.fix, fixup{at: len(a.b), label: l, end: len(a.b) + 4})
	a.u32(0)
}

// Ret emits ret.
func (a *Asm) Ret() { a.emit(0xc3) }

// RepMovsb emits rep movsb (copies RCX bytes from [RSI] to [RDI]).
func (a *Asm) RepMovsb() { a.emit(0xf3, 0xa4) }

// Vzeroupper emits vzeroupper.
func (a *Asm) Vzeroupper() { a.emit(0xc5, 0xf8, 0x77) }

// Sfence emits sfence (orders non-temporal stores).
func (a *Asm) Sfence() { a.emit(0x0f, 0xae, 0xf8) }

// Ud2 emits ud2 (a guaranteed trap; used as a guard after the code).
func (a *Asm) Ud2() { a.emit(0x0f, 0x0b) }

// Prefetcht0 emits prefetcht0 byte m.
func (a *Asm) Prefetcht0(m Mem) {
	x, b := memBits(m)
	a.rex(false, 0, x, b, false)
	a.emit(0x0f, 0x18)
	a.modrmMem(1, m, 1)
}

// Movnti emits movnti qword m, src (a non-temporal 8-byte store).
func (a *Asm) Movnti(m Mem, src Reg) {
	a.checkReg(src)
	x, b := memBits(m)
	a.rex(true, byte(src), x, b, false)
	a.emit(0x0f, 0xc3)
	a.modrmMem(byte(src), m, 1)
}

// Align pads with multi-byte nops up to a multiple of n (a power of two).
func (a *Asm) Align(n int) {
	for len(a.b)%n != 0 {
		switch k := n - len(a.b)%n; {
		case k >= 4:
			a.emit(0x0f, 0x1f, 0x40, 0x00) // nopl 0(%rax)
		case k == 3:
			a.emit(0x0f, 0x1f, 0x00)
		case k == 2:
			a.emit(0x66, 0x90)
		default:
			a.emit(0x90)
		}
	}
}

// Data appends raw bytes (tables placed after the code).
func (a *Asm) Data(b []byte) { a.b = append(a.b, b...) }

// Table appends each value of vs as w (4 or 8) little-endian bytes, its
// low 32 bits for w = 4, growing the buffer once.
func (a *Asm) Table(w int, vs []int64) {
	if w != 4 && w != 8 {
		a.fail("table width %d", w)
		return
	}
	n := len(a.b)
	a.b = slices.Grow(a.b, w*len(vs))[:n+w*len(vs)]
	for i, v := range vs {
		if w == 4 {
			binary.LittleEndian.PutUint32(a.b[n+4*i:], uint32(v))
		} else {
			binary.LittleEndian.PutUint64(a.b[n+8*i:], uint64(v))
		}
	}
}

// ---- vector moves ----

// vex emits a VEX prefix. pp: 0 none, 1 66, 2 F3, 3 F2; map 0F only.
func (a *Asm) vex(l256 bool, pp byte, r, x, b byte) {
	var lbit byte
	if l256 {
		lbit = 4
	}
	if x < 8 && b < 8 { // two-byte form
		a.emit(0xc5, (^r>>3&1)<<7|0xf<<3|lbit|pp)
		return
	}
	a.emit(0xc4, (^r>>3&1)<<7|(^x>>3&1)<<6|(^b>>3&1)<<5|1, 0xf<<3|lbit|pp)
}

// evex emits an EVEX prefix for a 512-bit operation in map 0F. r is the
// ModRM.reg register (0–31), x and b the index and base GPRs.
func (a *Asm) evex(w bool, pp byte, r, x, b byte) {
	p0 := (^r>>3&1)<<7 | (^x>>3&1)<<6 | (^b>>3&1)<<5 | (^r>>4&1)<<4 | 1
	var wb byte
	if w {
		wb = 0x80
	}
	p1 := wb | 0xf<<3 | 4 | pp
	p2 := byte(2<<5 | 8) // L'L = 10 (512), V' = 1 (inverted), no mask
	a.emit(0x62, p0, p1, p2)
}

func (a *Asm) checkV(v VReg, max VReg) {
	if v > max {
		a.fail("vector register %d out of range", v)
	}
}

// VLoad emits an unaligned vector load of width 16 (movdqu xmm, or vmovdqu
// xmm under VEX128), 32 (vmovdqu ymm) or 64 (vmovdqu64 zmm) bytes from m
// into v.
func (a *Asm) VLoad(width int, v VReg, m Mem) { a.vmov(width, v, m, 0x6f) }

// VStore emits an unaligned vector store of width 16, 32 or 64 bytes.
func (a *Asm) VStore(width int, m Mem, v VReg) { a.vmov(width, v, m, 0x7f) }

func (a *Asm) vmov(width int, v VReg, m Mem, op byte) {
	x, b := memBits(m)
	switch width {
	case 16:
		a.checkV(v, 15)
		if a.VEX128 {
			a.vex(false, 2, byte(v), x, b)
			a.emit(op)
		} else {
			a.emit(0xf3)
			a.rex(false, byte(v), x, b, false)
			a.emit(0x0f, op)
		}
		a.modrmMem(byte(v), m, 1)
	case 32:
		a.checkV(v, 15)
		a.vex(true, 2, byte(v), x, b)
		a.emit(op)
		a.modrmMem(byte(v), m, 1)
	case 64:
		a.checkV(v, 31)
		a.evex(true, 2, byte(v), x, b)
		a.emit(op)
		a.modrmMem(byte(v), m, 64)
	default:
		a.fail("vector width %d", width)
	}
}

// VStoreNT emits a non-temporal vector store (movntdq / vmovntdq) of width 16,
// 32 or 64 bytes. The destination must be aligned to width.
func (a *Asm) VStoreNT(width int, m Mem, v VReg) {
	x, b := memBits(m)
	switch width {
	case 16:
		a.checkV(v, 15)
		if a.VEX128 {
			a.vex(false, 1, byte(v), x, b)
			a.emit(0xe7)
		} else {
			a.emit(0x66)
			a.rex(false, byte(v), x, b, false)
			a.emit(0x0f, 0xe7)
		}
		a.modrmMem(byte(v), m, 1)
	case 32:
		a.checkV(v, 15)
		a.vex(true, 1, byte(v), x, b)
		a.emit(0xe7)
		a.modrmMem(byte(v), m, 1)
	case 64:
		a.checkV(v, 31)
		a.evex(false, 1, byte(v), x, b)
		a.emit(0xe7)
		a.modrmMem(byte(v), m, 64)
	default:
		a.fail("non-temporal width %d", width)
	}
}

// VShufI64x2 emits vshufi64x2 zmm(dst), zmm(src1), zmm(src2), imm: 128-bit
// lanes 0 and 1 of dst are lanes imm[1:0] and imm[3:2] of src1, lanes 2 and
// 3 are lanes imm[5:4] and imm[7:6] of src2 (EVEX.512.66.0F3A.W1 43 /r ib).
// Two rounds of it transpose a 4×4 matrix of 16-byte elements held in four
// registers.
func (a *Asm) VShufI64x2(dst, src1, src2 VReg, imm uint8) {
	if dst > 31 || src1 > 31 || src2 > 31 {
		a.fail("vector register out of range")
		return
	}
	r, v, m := byte(dst), byte(src1), byte(src2)
	p0 := (^r>>3&1)<<7 | (^m>>4&1)<<6 | (^m>>3&1)<<5 | (^r>>4&1)<<4 | 3 // map 0F3A; X extends rm
	p1 := byte(0x80) | (^v&0xf)<<3 | 4 | 1                              // W1, vvvv, pp = 66
	p2 := byte(2<<5) | (^v>>4&1)<<3                                     // L'L = 512, V'
	a.emit(0x62, p0, p1, p2, 0x43, 0xc0|(r&7)<<3|m&7, imm)
}

// Kxnorw emits kxnorw k(dst), k(a), k(b); with all three equal it sets the
// mask register to all ones (the mask a gather consumes).
func (a *Asm) Kxnorw(dst, x, y uint8) {
	if dst > 7 || x > 7 || y > 7 {
		a.fail("mask register out of range")
		return
	}
	a.emit(0xc5, 0x80|(^x&0xf)<<3|4, 0x46, 0xc0|dst<<3|y)
}

// VGather emits a 512-bit gather with 32-bit indices: vpgatherdd
// zmm(dst){k(mask)}, [base + zmm(idx)*scale] for elem 4, or vpgatherdq
// zmm(dst){k(mask)}, [base + ymm(idx)*scale] for elem 8. The mask register
// must be all ones before (the gather clears it); dst and idx must differ.
func (a *Asm) VGather(elem int, dst VReg, base Reg, idx VReg, scale uint8, mask uint8) {
	a.checkReg(base)
	if dst > 31 || idx > 31 || dst == idx || mask == 0 || mask > 7 || elem != 4 && elem != 8 {
		a.fail("bad gather operands")
		return
	}
	var ss byte
	switch scale {
	case 1:
	case 2:
		ss = 1
	case 4:
		ss = 2
	case 8:
		ss = 3
	default:
		a.fail("bad scale %d", scale)
		return
	}
	r, x, b := byte(dst), byte(idx), byte(base)
	p0 := (^r>>3&1)<<7 | (^x>>3&1)<<6 | (^b>>3&1)<<5 | (^r>>4&1)<<4 | 2 // map 0F38
	var w byte
	if elem == 8 {
		w = 0x80
	}
	p1 := w | 0xf<<3 | 4 | 1                 // pp = 66
	p2 := byte(2<<5) | (^x>>4&1)<<3 | mask&7 // L'L = 512, V' extends the index
	a.emit(0x62, p0, p1, p2, 0x90)
	if b&7 == 5 { // RBP/R13 base needs a displacement
		a.emit(1<<6|(r&7)<<3|4, ss<<6|(x&7)<<3|b&7, 0)
		return
	}
	a.emit((r&7)<<3|4, ss<<6|(x&7)<<3|b&7)
}
