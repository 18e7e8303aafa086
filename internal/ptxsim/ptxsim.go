// Package ptxsim executes PTX text on the CPU, for tests: exactly the
// instruction subset gpu's PTX emitter uses, with the semantics of the PTX
// ISA (32-bit operations wrap at 2^32, mul.hi, mul.wide, predicates,
// grid-stride branches). Every global access is checked against the
// memory regions the test mapped and for natural alignment, as a GPU
// faults on both. It is not a GPU model: threads run one after the other,
// which is exact for kernels without shared memory, barriers or atomics.
package ptxsim

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// ErrFault is wrapped by Run's errors for an access outside the mapped
// memory or a misaligned one.
var ErrFault = errors.New("ptxsim: memory fault")

type opnd struct {
	kind  byte // 'r' register, 'i' immediate, 's' special, 'm' memory, 'p' param, 'l' label, 'v' vector
	reg   int  // register slot (r, m base, v: first of two in regs2)
	imm   uint64
	name  string
	regs2 [2]int
}

type inst struct {
	guard  int // predicate slot, -1 none
	neg    bool
	op     string // full opcode, e.g. "mul.hi.u32"
	args   []opnd
	line   int
	target int // bra: instruction index
	isBra  bool
	isRet  bool
}

// Kernel is one parsed .entry.
type Kernel struct {
	Name   string
	params map[string]int
	nreg   int
	insts  []inst
}

// Module is a parsed PTX module.
type Module struct {
	Kernels map[string]*Kernel
}

// Parse parses a module; it rejects any directive or instruction outside
// the subset (so a new instruction in the emitter must be added here).
func Parse(src string) (*Module, error) {
	m := &Module{Kernels: map[string]*Kernel{}}
	lines := strings.Split(src, "\n")
	var k *Kernel
	var regs map[string]int
	var labels map[string]int
	inParams := false
	for i := 0; i < len(lines); i++ {
		ln := strings.TrimSpace(lines[i])
		if j := strings.Index(ln, "//"); j >= 0 {
			ln = strings.TrimSpace(ln[:j])
		}
		if ln == "" {
			continue
		}
		errf := func(f string, a ...any) error {
			return fmt.Errorf("ptxsim: line %d %q: %s", i+1, ln, fmt.Sprintf(f, a...))
		}
		switch {
		case k == nil && (strings.HasPrefix(ln, ".version") || strings.HasPrefix(ln, ".target") || strings.HasPrefix(ln, ".address_size")):
			continue
		case k == nil && strings.HasPrefix(ln, ".visible .entry "):
			name := strings.TrimSuffix(strings.TrimPrefix(ln, ".visible .entry "), "(")
			k = &Kernel{Name: name, params: map[string]int{}}
			regs, labels = map[string]int{}, map[string]int{}
			inParams = true
			continue
		case inParams && strings.HasPrefix(ln, ".param .u64 "):
			k.params[strings.TrimSuffix(strings.TrimPrefix(ln, ".param .u64 "), ",")] = len(k.params)
			continue
		case inParams && ln == ")":
			continue
		case inParams && ln == "{":
			inParams = false
			continue
		case k != nil && strings.HasPrefix(ln, ".reg "):
			f := strings.Fields(strings.TrimSuffix(ln, ";"))
			if len(f) != 3 {
				return nil, errf("bad .reg")
			}
			pre, nstr, ok := strings.Cut(f[2], "<")
			n, err := strconv.Atoi(strings.TrimSuffix(nstr, ">"))
			if !ok || err != nil {
				return nil, errf("bad .reg")
			}
			want := map[string]string{".pred": "%p", ".b32": "%r", ".b64": "%rd"}[f[1]]
			if want != pre {
				return nil, errf("register class %s for %s", f[1], pre)
			}
			for j := 0; j < n; j++ {
				regs[pre+strconv.Itoa(j)] = k.nreg
				k.nreg++
			}
			continue
		case k != nil && ln == "}":
			for idx := range k.insts {
				in := &k.insts[idx]
				if in.isBra {
					t, ok := labels[in.args[0].name]
					if !ok {
						return nil, fmt.Errorf("ptxsim: line %d: unknown label %s", in.line, in.args[0].name)
					}
					in.target = t
				}
			}
			m.Kernels[k.Name] = k
			k = nil
			continue
		case k != nil && strings.HasSuffix(ln, ":"):
			labels[strings.TrimSuffix(ln, ":")] = len(k.insts)
			continue
		case k == nil:
			return nil, errf("outside a kernel")
		}
		in, err := parseInst(ln, regs, k.params)
		if err != nil {
			return nil, errf("%v", err)
		}
		in.line = i + 1
		k.insts = append(k.insts, in)
	}
	if k != nil {
		return nil, fmt.Errorf("ptxsim: kernel %s not closed", k.Name)
	}
	return m, nil
}

// supported lists every opcode the simulator executes, with the register
// width of its destination (0: none) and sources.
var supported = map[string][2]int{
	"ld.param.u64": {64, 0}, "cvta.to.global.u64": {64, 64}, "mov.u32": {32, 32}, "mov.b64": {64, 64},
	"mad.lo.u32": {32, 32}, "mad.lo.s64": {64, 64}, "mul.lo.u32": {32, 32}, "mul.lo.s32": {32, 32},
	"mul.lo.s64": {64, 64}, "mul.lo.u64": {64, 64}, "mul.hi.u32": {32, 32}, "mul.hi.u64": {64, 64},
	"mul.wide.u32": {64, 32}, "add.s32": {32, 32}, "add.s64": {64, 64}, "sub.s32": {32, 32}, "sub.s64": {64, 64},
	"shr.u32": {32, 32}, "shr.u64": {64, 64}, "cvt.u64.u32": {64, 32}, "cvt.u32.u64": {32, 64},
	"setp.ge.u32": {1, 32}, "setp.lt.u32": {1, 32}, "setp.ge.u64": {1, 64}, "setp.lt.u64": {1, 64}, "setp.le.s64": {1, 64},
	"selp.b32": {32, 32}, "bra": {0, 0}, "ret": {0, 0},
	"ld.global.nc.u8": {32, 64}, "ld.global.nc.u16": {32, 64}, "ld.global.nc.u32": {32, 64}, "ld.global.nc.u64": {64, 64},
	"ld.global.nc.v2.u64": {64, 64},
	"st.global.u8":        {0, 32}, "st.global.u16": {0, 32}, "st.global.u32": {0, 32}, "st.global.u64": {0, 64}, "st.global.v2.u64": {0, 64},
}

func parseInst(ln string, regs map[string]int, params map[string]int) (inst, error) {
	in := inst{guard: -1}
	if !strings.HasSuffix(ln, ";") {
		return in, errors.New("missing ;")
	}
	ln = strings.TrimSuffix(ln, ";")
	if strings.HasPrefix(ln, "@") {
		g, rest, _ := strings.Cut(ln, " ")
		g = strings.TrimPrefix(g, "@")
		if strings.HasPrefix(g, "!") {
			in.neg, g = true, g[1:]
		}
		r, ok := regs[g]
		if !ok || !strings.HasPrefix(g, "%p") {
			return in, fmt.Errorf("unknown predicate %s", g)
		}
		in.guard, ln = r, rest
	}
	op, rest, _ := strings.Cut(ln, " ")
	widths, ok := supported[op]
	if !ok {
		return in, fmt.Errorf("opcode %s outside the simulated subset", op)
	}
	in.op = op
	switch op {
	case "ret":
		in.isRet = true
		return in, nil
	case "bra":
		in.isBra = true
		in.args = []opnd{{kind: 'l', name: strings.TrimSpace(rest)}}
		return in, nil
	}
	// Split operands on commas outside braces.
	var parts []string
	depth, start := 0, 0
	for i, c := range rest {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(rest[start:i]))
				start = i + 1
			}
		}
	}
	parts = append(parts, strings.TrimSpace(rest[start:]))
	for idx, s := range parts {
		o, err := parseOpnd(s, regs, params)
		if err != nil {
			return in, err
		}
		// Register widths: destination first (stores have none), then sources.
		want := widths[1]
		if idx == 0 && widths[0] != 0 {
			want = widths[0]
		}
		if strings.HasPrefix(op, "selp") && idx == 3 || strings.HasPrefix(op, "setp") && idx == 0 {
			want = 1
		}
		if o.kind == 'm' {
			want = 64
		}
		if err := checkWidth(s, o, want); err != nil {
			return in, err
		}
		in.args = append(in.args, o)
	}
	return in, nil
}

func checkWidth(s string, o opnd, want int) error {
	var names []string
	switch o.kind {
	case 'r':
		names = []string{s}
	case 'm':
		names = []string{o.name}
	case 'v':
		names = strings.Split(strings.Trim(s, "{}"), ",")
	default:
		return nil
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		var got int
		switch {
		case strings.HasPrefix(n, "%rd"):
			got = 64
		case strings.HasPrefix(n, "%r"):
			got = 32
		case strings.HasPrefix(n, "%p"):
			got = 1
		}
		if got != want {
			return fmt.Errorf("operand %s: register of %d bits where %d are wanted", n, got, want)
		}
	}
	return nil
}

func parseOpnd(s string, regs map[string]int, params map[string]int) (opnd, error) {
	switch {
	case strings.HasPrefix(s, "%tid.") || strings.HasPrefix(s, "%ntid.") || strings.HasPrefix(s, "%ctaid.") || strings.HasPrefix(s, "%nctaid."):
		return opnd{kind: 's', name: s}, nil
	case strings.HasPrefix(s, "%"):
		r, ok := regs[s]
		if !ok {
			return opnd{}, fmt.Errorf("undeclared register %s", s)
		}
		return opnd{kind: 'r', reg: r}, nil
	case strings.HasPrefix(s, "{"):
		f := strings.Split(strings.Trim(s, "{}"), ",")
		if len(f) != 2 {
			return opnd{}, fmt.Errorf("vector %s", s)
		}
		o := opnd{kind: 'v'}
		for i, n := range f {
			r, ok := regs[strings.TrimSpace(n)]
			if !ok {
				return opnd{}, fmt.Errorf("undeclared register %s", n)
			}
			o.regs2[i] = r
		}
		return o, nil
	case strings.HasPrefix(s, "["):
		in := strings.Trim(s, "[]")
		if p, ok := params[in]; ok {
			return opnd{kind: 'p', reg: p}, nil
		}
		base, off, _ := strings.Cut(in, "+")
		r, ok := regs[base]
		if !ok {
			return opnd{}, fmt.Errorf("address %s", s)
		}
		o := opnd{kind: 'm', reg: r, name: base}
		if off != "" {
			v, err := strconv.ParseInt(off, 10, 32)
			if err != nil {
				return opnd{}, fmt.Errorf("address offset %s", off)
			}
			o.imm = uint64(v)
		}
		return o, nil
	}
	t := strings.TrimSuffix(s, "U")
	if v, err := strconv.ParseInt(t, 0, 64); err == nil {
		return opnd{kind: 'i', imm: uint64(v)}, nil
	}
	if v, err := strconv.ParseUint(t, 0, 64); err == nil {
		return opnd{kind: 'i', imm: v}, nil
	}
	return opnd{}, fmt.Errorf("operand %q", s)
}

// Memory is the simulated global memory: regions at fixed addresses.
type Memory struct {
	regions []region
}

type region struct {
	base uint64
	data []byte
}

// Map makes data visible at address base (reads and writes go to data).
func (m *Memory) Map(base uint64, data []byte) {
	m.regions = append(m.regions, region{base, data})
}

func (m *Memory) at(addr uint64, size int) ([]byte, error) {
	if addr%uint64(size) != 0 {
		return nil, fmt.Errorf("%w: misaligned %d-byte access at %#x", ErrFault, size, addr)
	}
	for _, r := range m.regions {
		if addr >= r.base && addr+uint64(size) <= r.base+uint64(len(r.data)) {
			o := addr - r.base
			return r.data[o : o+uint64(size)], nil
		}
	}
	return nil, fmt.Errorf("%w: %d-byte access at %#x outside every mapped region", ErrFault, size, addr)
}

// Stats counts what Run executed.
type Stats struct{ Instructions, Threads uint64 }

// Run executes kernel name over a grid of grid[0]×grid[1]×grid[2] blocks
// of block[0]×block[1]×block[2] threads, with the given .u64 parameters in
// declaration order. It stops at the first fault.
func (m *Module) Run(name string, params []uint64, grid, block [3]int, mem *Memory) (Stats, error) {
	var st Stats
	k, ok := m.Kernels[name]
	if !ok {
		return st, fmt.Errorf("ptxsim: no kernel %s", name)
	}
	if len(params) != len(k.params) {
		return st, fmt.Errorf("ptxsim: %s takes %d parameters, got %d", name, len(k.params), len(params))
	}
	reg := make([]uint64, k.nreg)
	sp := map[string]uint64{}
	dims := []string{"x", "y", "z"}
	for i, d := range dims {
		sp["%ntid."+d], sp["%nctaid."+d] = uint64(block[i]), uint64(grid[i])
	}
	for cz := 0; cz < grid[2]; cz++ {
		for cy := 0; cy < grid[1]; cy++ {
			for cx := 0; cx < grid[0]; cx++ {
				for tz := 0; tz < block[2]; tz++ {
					for ty := 0; ty < block[1]; ty++ {
						for tx := 0; tx < block[0]; tx++ {
							st.Threads++
							for i, v := range [6]int{cx, cy, cz, tx, ty, tz} {
								pre := "%ctaid."
								if i >= 3 {
									pre = "%tid."
								}
								sp[pre+dims[i%3]] = uint64(v)
							}
							if err := k.thread(reg, params, sp, mem, &st); err != nil {
								return st, fmt.Errorf("ptxsim: %s block (%d,%d,%d) thread (%d,%d,%d): %w", name, cx, cy, cz, tx, ty, tz, err)
							}
						}
					}
				}
			}
		}
	}
	return st, nil
}

func (k *Kernel) thread(reg []uint64, params []uint64, sp map[string]uint64, mem *Memory, st *Stats) error {
	val := func(o opnd) uint64 {
		switch o.kind {
		case 'r':
			return reg[o.reg]
		case 'i':
			return o.imm
		case 's':
			return sp[o.name]
		}
		panic("ptxsim: operand kind " + string(o.kind))
	}
	const limit = 1 << 32
	for pc := 0; pc < len(k.insts); {
		in := &k.insts[pc]
		pc++
		st.Instructions++
		if st.Instructions > limit {
			return errors.New("instruction limit reached (endless loop?)")
		}
		if in.guard >= 0 && (reg[in.guard] != 0) == in.neg {
			continue
		}
		if in.isRet {
			return nil
		}
		if in.isBra {
			pc = in.target
			continue
		}
		a := in.args
		set := func(v uint64) { reg[a[0].reg] = v }
		set32 := func(v uint64) { reg[a[0].reg] = v & 0xffffffff }
		b := func(i int) uint64 { return val(a[i]) }
		b32 := func(i int) uint64 { return val(a[i]) & 0xffffffff }
		switch in.op {
		case "ld.param.u64":
			set(params[a[1].reg])
		case "cvta.to.global.u64", "mov.b64":
			set(b(1))
		case "mov.u32":
			set32(b(1))
		case "mad.lo.u32":
			set32(b32(1)*b32(2) + b32(3))
		case "mad.lo.s64":
			set(b(1)*b(2) + b(3))
		case "mul.lo.u32", "mul.lo.s32":
			set32(b32(1) * b32(2))
		case "mul.lo.s64", "mul.lo.u64":
			set(b(1) * b(2))
		case "mul.hi.u32":
			set32((b32(1) * b32(2)) >> 32)
		case "mul.hi.u64":
			hi, _ := bits.Mul64(b(1), b(2))
			set(hi)
		case "mul.wide.u32":
			set(b32(1) * b32(2))
		case "add.s32":
			set32(b32(1) + b32(2))
		case "add.s64":
			set(b(1) + b(2))
		case "sub.s32":
			set32(b32(1) - b32(2))
		case "sub.s64":
			set(b(1) - b(2))
		case "shr.u32":
			set32(b32(1) >> (b(2) & 31))
		case "shr.u64":
			set(b(1) >> (b(2) & 63))
		case "cvt.u64.u32", "cvt.u32.u64":
			set(b32(1))
		case "setp.ge.u32":
			set(bool01(b32(1) >= b32(2)))
		case "setp.lt.u32":
			set(bool01(b32(1) < b32(2)))
		case "setp.ge.u64":
			set(bool01(b(1) >= b(2)))
		case "setp.lt.u64":
			set(bool01(b(1) < b(2)))
		case "setp.le.s64":
			set(bool01(int64(b(1)) <= int64(b(2))))
		case "selp.b32":
			if reg[a[3].reg] != 0 {
				set32(b32(1))
			} else {
				set32(b32(2))
			}
		default:
			size, vec, load := accessOf(in.op)
			addrOp := a[1]
			if !load {
				addrOp = a[0]
			}
			addr := reg[addrOp.reg] + addrOp.imm
			span := size
			if vec {
				span = 16
			}
			p, err := mem.at(addr, span)
			if err != nil {
				return fmt.Errorf("line %d (%s): %w", in.line, in.op, err)
			}
			if load {
				if vec {
					reg[a[0].regs2[0]], reg[a[0].regs2[1]] = le(p[:8]), le(p[8:])
				} else {
					set(le(p))
				}
			} else if vec {
				putle(p[:8], reg[a[1].regs2[0]])
				putle(p[8:], reg[a[1].regs2[1]])
			} else {
				putle(p, b(1))
			}
		}
	}
	return errors.New("fell off the end of the kernel")
}

func accessOf(op string) (size int, vec, load bool) {
	load = strings.HasPrefix(op, "ld.")
	vec = strings.Contains(op, ".v2.")
	switch {
	case strings.HasSuffix(op, "u8"):
		size = 1
	case strings.HasSuffix(op, "u16"):
		size = 2
	case strings.HasSuffix(op, "u32"):
		size = 4
	default:
		size = 8
	}
	return
}

func bool01(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func le(p []byte) uint64 {
	var v uint64
	for i := len(p) - 1; i >= 0; i-- {
		v = v<<8 | uint64(p[i])
	}
	return v
}

func putle(p []byte, v uint64) {
	for i := range p {
		p[i] = byte(v)
		v >>= 8
	}
}
