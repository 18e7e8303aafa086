package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// A Plan is the GPU lowering of one committed type, made from the IR that
// Commit produces (the same normalised loop IR package jit compiles for the
// CPU). One GPU thread moves one word of W bytes of the packed stream; the
// stream is numbered by word, and in the 1-D launch thread t handles stream
// word q = q0 + t and needs, for it, the typed address of that word:
//
//	k  = q / wordsPerElement          element
//	r  = q - k*wordsPerElement        word inside the element
//	a  = k*Extent + disp              disp: every Disp of the chain, folded
//	for each level, outermost first:
//	    i = r / wordsPerChild ; r -= i*wordsPerChild
//	    a += i*Stride                 (loop level)
//	    a += table[pos+i]             (index level: offsets in the lookaside table)
//	body: one block  → a += r*W
//	      block list → b = the last block with prefix[b] ≤ r*W (branchless
//	                   binary search over the table); a += offs[b] + r*W - prefix[b]
//
// Every division is by a constant of the plan and becomes a multiply-high and
// a shift (magic.go). Inside an element every index is below 2^31 (plans
// decline elements of 2 GiB and more), so the level arithmetic is 32-bit;
// the element split is 32-bit too when the launch's last word is below 2^31
// and 64-bit otherwise (two kernel variants). The 3-D launch (where the grid
// limits allow) takes the body word from x and the innermost level's index
// from y, and decomposes only the rows above, z (vmath). A launch may start
// and end at
// any word, so a pack window (from, n) of the packed stream is resumable at
// any byte: a window whose ends or addresses are not multiples of the
// plan's word size runs the variant with the largest word size they allow,
// down to single bytes.
type Plan struct {
	key     string // the canonical IR text: equal keys pack the same bytes
	name    string // short hash of key, for kernel symbols
	size    int64  // packed bytes per element
	extent  int64
	maxWord int64 // largest word size the layout allows (1..16)
	disp    int64 // the Disp of every node on the chain, summed
	levels  []level
	unit    int64 // packed bytes per body instance
	list    bool  // the body is a block list (else one block)
	listN   int64 // blocks in the list
	listPad int64 // listN rounded up to a power of two
	offsPos int64 // table position of the list's offsets
	prePos  int64 // table position of the list's packed prefixes (listPad entries)
	tab     []int64
	ir      *ddtir.IR

	srcs  map[srcKey]string // emitted kernels (cache.go)
	srcMu sync.Mutex
}

// level is one repetition between the element and the body: a loop
// (tab < 0) or an index list whose offsets are table entries [tab, tab+count).
type level struct {
	count  int64
	stride int64
	tab    int64
	child  int64 // packed bytes per child instance
}

// Limits of the plans this package makes. A type beyond them is declined
// with an error wrapping errs.ErrNotSupported; its data can still be packed
// by copying it to the host.
const (
	maxLevels     = 16      // repetition levels between element and body
	maxListBlocks = 1 << 20 // blocks of a flattened body
	maxTable      = 1 << 24 // lookaside table entries
	maxTreeNodes  = 1 << 16 // IR nodes walked (a DAG can be a huge tree)
	maxWordSize   = 16      // bytes per thread and step
)

// ErrDeclined is wrapped by NewPlan's errors for a committed type the GPU
// kernels do not cover (see the limits in docs/gpu.md). It wraps
// errs.ErrNotSupported.
var ErrDeclined = fmt.Errorf("gpu: type has no GPU kernel: %w", errs.ErrNotSupported)

// planCache maps the canonical IR text to its plan, so that identical
// types share a plan and its kernels. At most planCacheEntries are kept; a
// full cache drops an arbitrary entry (its plan lives on in the types and
// devices that use it).
var (
	planMu    sync.Mutex
	planCache = map[string]*Plan{}
)

const planCacheEntries = 4096

// NewPlan returns the GPU plan of the committed type t. Plans are cached by
// the type's canonical IR, so committing an identical type again reuses the
// plan and its emitted kernels. Errors: ddt.ErrInvalid for a nil type,
// ddt.ErrNotCommitted before Commit, ErrDeclined for a shape beyond the
// plan's limits.
func NewPlan(t *ddt.Type) (*Plan, error) {
	if t == nil {
		return nil, fmt.Errorf("gpu: NewPlan: nil type: %w", ddt.ErrInvalid)
	}
	ir := ddtir.TypeIR(t)
	if ir == nil {
		return nil, fmt.Errorf("gpu: NewPlan %s: %w", t.Name(), ddt.ErrNotCommitted)
	}
	return planOf(ir)
}

// planOf returns the cached plan of ir, lowering it on a miss.
func planOf(ir *ddtir.IR) (*Plan, error) {
	key := ir.String()
	planMu.Lock()
	p, ok := planCache[key]
	planMu.Unlock()
	if ok {
		return p, nil
	}
	p, err := lower(ir, key)
	if err != nil {
		return nil, err
	}
	planMu.Lock()
	defer planMu.Unlock()
	if q, ok := planCache[key]; ok {
		return q, nil
	}
	if len(planCache) >= planCacheEntries {
		for k := range planCache {
			delete(planCache, k)
			break
		}
	}
	planCache[key] = p
	return p, nil
}

func decline(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrDeclined}, args...)...)
}

// lower builds the plan of ir.
func lower(ir *ddtir.IR, key string) (*Plan, error) {
	sum := sha256.Sum256([]byte(key))
	p := &Plan{key: key, name: hex.EncodeToString(sum[:6]), size: ir.Size, extent: ir.Extent, ir: ir, maxWord: 1}
	if ir.Root == nil || ir.Size == 0 {
		return p, nil
	}
	if !ddtir.TreeFits(ir.Root, maxTreeNodes) {
		return nil, decline("IR tree of more than %d nodes", maxTreeNodes)
	}
	if ir.Size >= 1<<31 {
		return nil, decline("element of %d packed bytes (limit 2 GiB)", ir.Size)
	}
	for p.maxWord < maxWordSize && ir.Align%(2*p.maxWord) == 0 {
		p.maxWord *= 2
	}
	n := ir.Root
	for {
		p.disp += n.Disp
		var l level
		switch {
		case n.Op == ddtir.OpLoop:
			l = level{count: n.Count, stride: n.Stride, tab: -1, child: n.Child.Size}
			n = n.Child
		case n.Op == ddtir.OpIndex:
			l = level{count: int64(len(n.Offsets)), tab: p.table(n.Offsets), child: n.Child.Size}
			n = n.Child
		case n.Op == ddtir.OpBlocks && equalLens(n.Lens):
			l = level{count: int64(len(n.Offsets)), tab: p.table(n.Offsets), child: n.Lens[0]}
			n = &ddtir.Node{Op: ddtir.OpBlock, Len: n.Lens[0], Size: n.Lens[0]}
		default:
			goto body
		}
		if len(p.levels) == maxLevels {
			return nil, decline("more than %d loop levels", maxLevels)
		}
		p.levels = append(p.levels, l)
	}
body:
	p.unit = n.Size
	if n.Op == ddtir.OpBlock {
		return p.check()
	}
	blocks := flatten(n, -n.Disp, nil) // n.Disp is already in p.disp
	if blocks == nil {
		return nil, decline("body of more than %d blocks", maxListBlocks)
	}
	if len(blocks) == 1 {
		p.disp += blocks[0].off
		return p.check()
	}
	p.list = true
	p.listN = int64(len(blocks))
	p.listPad = 1 << bits.Len64(uint64(p.listN-1))
	offs := make([]int64, p.listN)
	pre := make([]int64, p.listPad)
	acc := int64(0)
	for i, b := range blocks {
		offs[i], pre[i] = b.off, acc
		acc += b.len
	}
	for i := p.listN; i < p.listPad; i++ {
		pre[i] = math.MaxInt64
	}
	p.offsPos = p.table(offs)
	p.prePos = p.table(pre)
	return p.check()
}

// check applies the limits that need the whole plan.
func (p *Plan) check() (*Plan, error) {
	if len(p.tab) > maxTable {
		return nil, decline("lookaside table of %d entries (limit %d)", len(p.tab), maxTable)
	}
	u := p.unit
	for i := len(p.levels) - 1; i >= 0; i-- {
		if p.levels[i].child != u {
			return nil, fmt.Errorf("gpu: internal: level %d child size %d != %d", i, p.levels[i].child, u)
		}
		u *= p.levels[i].count
	}
	if u != p.size {
		return nil, fmt.Errorf("gpu: internal: levels give %d bytes per element, IR %d", u, p.size)
	}
	return p, nil
}

// table appends v to the lookaside table and returns its position.
func (p *Plan) table(v []int64) int64 {
	pos := int64(len(p.tab))
	p.tab = append(p.tab, v...)
	return pos
}

type blk struct{ off, len int64 }

// flatten appends the blocks of one instance of n at origin o, in packing
// order, merging blocks that continue each other; nil when there are more
// than maxListBlocks.
func flatten(n *ddtir.Node, o int64, out []blk) []blk {
	if out == nil {
		out = []blk{}
	}
	o += n.Disp
	add := func(off, l int64) bool {
		if k := len(out) - 1; k >= 0 && out[k].off+out[k].len == off {
			out[k].len += l
			return true
		}
		out = append(out, blk{off, l})
		return len(out) <= maxListBlocks
	}
	switch n.Op {
	case ddtir.OpBlock:
		if !add(o, n.Len) {
			return nil
		}
	case ddtir.OpBlocks:
		for i, off := range n.Offsets {
			if !add(o+off, n.Lens[i]) {
				return nil
			}
		}
	case ddtir.OpLoop:
		for i := int64(0); i < n.Count; i++ {
			if out = flatten(n.Child, o+i*n.Stride, out); out == nil {
				return nil
			}
		}
	case ddtir.OpIndex:
		for _, off := range n.Offsets {
			if out = flatten(n.Child, o+off, out); out == nil {
				return nil
			}
		}
	case ddtir.OpStruct:
		for i, off := range n.Offsets {
			if out = flatten(n.Children[i], o+off, out); out == nil {
				return nil
			}
		}
	}
	return out
}

func equalLens(l []int64) bool {
	for _, x := range l {
		if x != l[0] {
			return false
		}
	}
	return len(l) > 0
}

// contiguous reports whether count elements with their origin at byte base
// are one run of bytes, and where it starts.
func (p *Plan) contiguous(base int64, count int) (int64, bool) {
	if p.size == 0 || len(p.levels) != 0 || p.list || (count > 1 && p.extent != p.size) {
		return 0, false
	}
	return base + p.disp, true
}

// Size returns the packed bytes per element.
func (p *Plan) Size() int64 { return p.size }

// MaxWord returns the largest number of bytes one thread moves per step
// (1, 2, 4, 8 or 16): the largest power of two dividing every block's
// offset and length and the extent. A launch uses less when its buffers or
// window are less aligned.
func (p *Plan) MaxWord() int64 { return p.maxWord }

// Levels returns the number of repetition levels between the element and
// the body (the depth of the index decomposition, the element excluded).
func (p *Plan) Levels() int { return len(p.levels) }

// String describes the plan in one line per level, for debugging, e.g.
//
//	gpu plan size=72 extent=8192 word=8 disp=0
//	  loop count=9 stride=968 child=8
//	  body block len=8
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpu plan size=%d extent=%d word=%d disp=%d\n", p.size, p.extent, p.maxWord, p.disp)
	for _, l := range p.levels {
		if l.tab < 0 {
			fmt.Fprintf(&b, "  loop count=%d stride=%d child=%d\n", l.count, l.stride, l.child)
		} else {
			fmt.Fprintf(&b, "  index count=%d table=%d child=%d\n", l.count, l.tab, l.child)
		}
	}
	switch {
	case p.size == 0:
		b.WriteString("  empty\n")
	case p.list:
		fmt.Fprintf(&b, "  body list blocks=%d len=%d table=%d,%d\n", p.listN, p.unit, p.offsPos, p.prePos)
	default:
		fmt.Fprintf(&b, "  body block len=%d\n", p.unit)
	}
	return b.String()
}
