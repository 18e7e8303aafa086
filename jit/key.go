package jit

import (
	"encoding/binary"
	"sync"

	"github.com/weft-hpc/weft/internal/ddtir"
)

// The code cache key: a compact binary form of everything the IR's text
// form (ddtir.IR.String) prints, plus the features, the policy and the
// configuration (config.key). Building
// it allocates nothing (the buffer is pooled and the map is probed with
// string(b), which Go does not copy), so a cache hit costs one pass over
// the IR instead of formatting it as text.

var keyPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func appendKey(b []byte, ir *ddtir.IR, f Features, lazy bool, cfg *config) []byte {
	b = append(b, cfg.key...)
	var flags byte
	if f.AVX512 {
		flags |= 1
	}
	if f.AVX2 {
		flags |= 2
	}
	if f.ERMS {
		flags |= 4
	}
	if lazy {
		flags |= 8
	}
	if ir.Contig {
		flags |= 16
	}
	b = append(b, flags)
	for _, v := range [...]int64{ir.Size, ir.Extent, ir.LB, ir.TrueLB, ir.TrueExtent, ir.Align, ir.ElemSize} {
		b = binary.AppendVarint(b, v)
	}
	if ir.Root == nil {
		return append(b, 0xff)
	}
	return appendNodeKey(b, ir.Root)
}

func appendNodeKey(b []byte, n *ddtir.Node) []byte {
	b = binary.AppendUvarint(b, uint64(n.Op))
	for _, v := range [...]int64{n.Disp, n.Size, n.Align} {
		b = binary.AppendVarint(b, v)
	}
	switch n.Op {
	case ddtir.OpBlock:
		b = binary.AppendVarint(b, n.Len)
	case ddtir.OpLoop:
		b = binary.AppendVarint(b, n.Count)
		b = binary.AppendVarint(b, n.Stride)
	case ddtir.OpIndex, ddtir.OpStruct:
		b = appendList(b, n.Offsets)
	case ddtir.OpBlocks:
		b = appendList(b, n.Offsets)
		b = appendList(b, n.Lens)
	default: // an op this file does not know: its full text form
		return append(b, n.String()...)
	}
	switch n.Op {
	case ddtir.OpLoop, ddtir.OpIndex:
		b = appendNodeKey(b, n.Child)
	case ddtir.OpStruct:
		b = binary.AppendUvarint(b, uint64(len(n.Children)))
		for _, c := range n.Children {
			b = appendNodeKey(b, c)
		}
	}
	return b
}

// appendList writes a length and the deltas of l (index lists are mostly
// increasing, so deltas are short varints).
func appendList(b []byte, l []int64) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	prev := int64(0)
	for _, v := range l {
		b = binary.AppendVarint(b, v-prev)
		prev = v
	}
	return b
}
