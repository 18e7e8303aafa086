// Package ddtir holds what packages ddt and jit share and users must not
// touch: the normalised loop IR of a committed datatype, the Kernel and
// Compiler interfaces, and the registry through which jit becomes ddt's
// compiler.
package ddtir

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// This file defines the normalised loop IR that ddt's Commit produces and
// that both ddt's interpreter and package jit walk. docs/ddt-ir.md is the
// long-form specification. The IR is internal on purpose: ddt's bounds check
// reads IR.TrueLB, IR.TrueExtent, IR.Extent and IR.Size before the unchecked
// loops and generated code run, so no code outside this module may hold a
// mutable IR (users see its text through ddt.Type.DumpIR).
//
// Addressing model, in one paragraph. A committed type describes ONE element.
// Its IR root is a tree of nodes; every node describes the bytes of one
// "instance" relative to that instance's origin. Offsets, strides and
// displacements are signed byte counts. Element k (0 ≤ k < count) of a
// Pack/Unpack has its origin at typed-buffer index base + k*IR.Extent, where
// base is the index in the typed buffer of displacement 0 (the MPI buffer
// address) of element 0. The packed stream is the concatenation, in order, of
// the blocks the tree visits, element after element; its length is
// count*IR.Size.

// Op is the kind of an IR node.
type Op uint8

const (
	// OpBlock is a leaf: Len contiguous bytes at the instance origin + Disp.
	OpBlock Op = iota + 1
	// OpLoop repeats Child Count times; instance i of Child has its origin at
	// Disp + i*Stride. Stride may be negative or zero (zero only when
	// Count ≤ 1).
	OpLoop
	// OpIndex repeats Child len(Offsets) times; instance i of Child has its
	// origin at Disp + Offsets[i] (a block-indexed loop). Offsets are in
	// packing order, not necessarily sorted.
	OpIndex
	// OpBlocks is a leaf list: len(Offsets) contiguous blocks, block i being
	// Lens[i] bytes at Disp + Offsets[i], in packing order (an indexed loop
	// over bytes, DAME's INDEXFINAL). Every Lens[i] > 0.
	OpBlocks
	// OpStruct visits heterogeneous children: Children[i] has its origin at
	// Disp + Offsets[i], in packing order.
	OpStruct
)

// String returns the IR text name of the op.
func (o Op) String() string {
	switch o {
	case OpBlock:
		return "block"
	case OpLoop:
		return "loop"
	case OpIndex:
		return "index"
	case OpBlocks:
		return "blocks"
	case OpStruct:
		return "struct"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// MaxAlign is the largest alignment the IR records in Node.Align and IR.Align.
const MaxAlign = 64

// Node is one node of the normalised IR. Which fields are meaningful depends
// on Op (see the Op constants); the others are zero. Nodes are immutable once
// the IR is built and may be shared between several parents and types.
type Node struct {
	Op Op

	// Disp shifts the whole node: every byte this node copies lies at
	// Disp plus the offsets described by Op, relative to the instance origin.
	Disp int64

	// Len is the block length in bytes (OpBlock), > 0.
	Len int64

	// Count and Stride describe OpLoop. Count ≥ 1.
	Count  int64
	Stride int64

	// Offsets lists the instance origins (OpIndex, OpStruct) or block starts
	// (OpBlocks) relative to Disp, in packing order. len(Offsets) ≥ 1.
	Offsets []int64
	// Lens lists the block lengths of OpBlocks, parallel to Offsets.
	Lens []int64

	// Child is the repeated body of OpLoop and OpIndex.
	Child *Node
	// Children are the bodies of OpStruct, parallel to Offsets.
	Children []*Node

	// Size is the number of packed bytes one instance of this node
	// produces: Len, Count*Child.Size, len(Offsets)*Child.Size, sum(Lens),
	// or the sum of the children's sizes. Always > 0.
	Size int64

	// Prefix, for OpBlocks and OpStruct, holds packed-stream offsets:
	// Prefix[i] is the number of packed bytes before entry i, and
	// Prefix[len(Offsets)] == Size. It lets a resumable packer find the entry
	// holding a given packed offset by binary search. Nil for other ops.
	Prefix []int64

	// Lo and Hi bound the bytes the node touches, relative to the instance
	// origin: every copied byte lies in [Lo, Hi). Hi-Lo is the node's true
	// extent.
	Lo, Hi int64

	// Align is a power of two not above MaxAlign that divides the start
	// offset (relative to the instance origin, Disp included) and the length
	// of every contiguous block this node copies. It is computed
	// conservatively (the true alignment may be larger, never smaller). If
	// the instance origin is A-aligned, every block starts at a
	// min(A, Align)-aligned address and its length is a multiple of
	// min(A, Align).
	Align int64

	// MinBlock and MaxBlock are the smallest and largest contiguous block
	// lengths this node copies.
	MinBlock, MaxBlock int64

	// Blocks is the number of contiguous blocks one instance copies.
	Blocks int64
}

// IR is the normalised form of one committed datatype, as handed to a
// Compiler. Its fields are read-only.
type IR struct {
	// Root describes one element of the type. Nil when Size == 0 (an empty
	// type copies nothing).
	Root *Node

	// Size is the number of packed bytes per element (== Root.Size).
	Size int64
	// Extent is the distance between the origins of consecutive elements
	// (ub - lb). It may be zero or negative after Resized.
	Extent int64
	// LB is the lower bound; TrueLB and TrueExtent describe the bytes actually
	// touched by one element: [TrueLB, TrueLB+TrueExtent) relative to its
	// origin (equal to Root.Lo and Root.Hi-Root.Lo).
	LB, TrueLB, TrueExtent int64

	// Align is Root.Align further reduced to divide Extent: when the
	// typed buffer's base address (address of displacement 0 of element 0)
	// is A-aligned, every block of every element starts min(A, Align)-aligned.
	Align int64

	// ElemSize is the size of the predefined element type when every basic
	// element of the type is the same predefined type, else 0.
	ElemSize int64

	// Contig reports that one element is a single block of Size bytes at
	// offset TrueLB and Extent == Size, so count elements are one contiguous
	// run of count*Size bytes.
	Contig bool

	// GPU is package gpu's plan of this type (with its emitted kernels),
	// stored on first use so that a type carries its GPU kernels as it
	// carries its JIT code, and drops them with it. It is the IR's only
	// mutable field; ddt never reads it.
	GPU atomic.Pointer[any]
}

// String prints the IR in the indented text form used in docs/ddt-ir.md,
// for example:
//
//	ir size=72 extent=8192 lb=0 true_lb=0 true_extent=7784 align=8 elem=8
//	  loop count=9 stride=968 size=72 align=8
//	    block len=8 size=8 align=8
//
// The text is canonical: two IRs with the same String copy the same bytes in
// the same order, so it can key a code cache. A nil *IR prints "<nil>".
func (ir *IR) String() string {
	if ir == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ir size=%d extent=%d lb=%d true_lb=%d true_extent=%d align=%d elem=%d",
		ir.Size, ir.Extent, ir.LB, ir.TrueLB, ir.TrueExtent, ir.Align, ir.ElemSize)
	if ir.Contig {
		b.WriteString(" contig")
	}
	b.WriteByte('\n')
	if ir.Root != nil {
		ir.Root.format(&b, 1)
	}
	return b.String()
}

// String prints the node and its subtree in IR text form ("<nil>" for a nil
// *Node).
func (n *Node) String() string {
	if n == nil {
		return "<nil>"
	}
	var b strings.Builder
	n.format(&b, 0)
	return b.String()
}

func (n *Node) format(b *strings.Builder, depth int) {
	b.WriteString(strings.Repeat("  ", depth))
	b.WriteString(n.Op.String())
	switch n.Op {
	case OpBlock:
		fmt.Fprintf(b, " len=%d", n.Len)
	case OpLoop:
		fmt.Fprintf(b, " count=%d stride=%d", n.Count, n.Stride)
	case OpIndex, OpStruct:
		fmt.Fprintf(b, " n=%d offsets=%s", len(n.Offsets), fmtList(n.Offsets))
	case OpBlocks:
		fmt.Fprintf(b, " n=%d offsets=%s lens=%s", len(n.Offsets), fmtList(n.Offsets), fmtList(n.Lens))
	}
	if n.Disp != 0 {
		fmt.Fprintf(b, " disp=%d", n.Disp)
	}
	fmt.Fprintf(b, " size=%d align=%d\n", n.Size, n.Align)
	switch n.Op {
	case OpLoop, OpIndex:
		n.Child.format(b, depth+1)
	case OpStruct:
		for _, c := range n.Children {
			c.format(b, depth+1)
		}
	}
}

func fmtList(v []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(x, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// Walk calls fn for n and every node below it, parents before children,
// in packing order; a node shared by several parents is visited once per
// parent. It does nothing for a nil *Node.
func (n *Node) Walk(fn func(*Node)) {
	if n == nil {
		return
	}
	fn(n)
	switch n.Op {
	case OpLoop, OpIndex:
		n.Child.Walk(fn)
	case OpStruct:
		for _, c := range n.Children {
			c.Walk(fn)
		}
	}
}

// Nodes returns the number of nodes in the tree rooted at n, counting a
// shared node once per parent as Walk does (0 for a nil *Node).
func (n *Node) Nodes() int {
	c := 0
	n.Walk(func(*Node) { c++ })
	return c
}

// TreeFits reports whether the tree under n, a sub-tree shared by several
// parents counted once per parent, has at most budget nodes (a nil tree
// fits). It stops walking as soon as the budget is spent, so a tree that
// shares sub-trees exponentially costs no more than budget steps to refuse.
func TreeFits(n *Node, budget int) bool { return n == nil || fits(n, &budget) }

func fits(n *Node, budget *int) bool {
	if *budget--; *budget < 0 {
		return false
	}
	switch n.Op {
	case OpLoop, OpIndex:
		return fits(n.Child, budget)
	case OpStruct:
		for _, c := range n.Children {
			if !fits(c, budget) {
				return false
			}
		}
	}
	return true
}
