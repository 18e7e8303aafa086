package gpu

import (
	"fmt"

	"github.com/weft-hpc/weft/ddt"
)

var errInvalid = ddt.ErrInvalid

// Kernel sources are cached per plan (and plans per canonical IR, plan.go):
// a type committed again, or another type with the same IR, reuses the text
// and, in each device, the kernels built from it.

type lang uint8

const (
	langPTX lang = iota
	langOpenCL
)

// srcKey names an emitted text: the module of the one kernel v (what a
// Device builds), or, with all set, the whole module of the plan for word
// size v.w (Plan.PTX, Plan.OpenCL; the other fields of v are zero).
type srcKey struct {
	lang lang
	v    variant
	all  bool
}

// kernelSource returns the module text holding only kernel v of the plan,
// in language l.
func (p *Plan) kernelSource(l lang, v variant) string {
	return p.source(srcKey{lang: l, v: v})
}

// source returns the module text k names, emitting it on first use.
func (p *Plan) source(k srcKey) string {
	p.srcMu.Lock()
	defer p.srcMu.Unlock()
	if s, ok := p.srcs[k]; ok {
		return s
	}
	if p.srcs == nil {
		p.srcs = map[srcKey]string{}
	}
	ks := []variant{k.v}
	if k.all {
		ks = p.allKinds(k.v.w)
	}
	s := p.emit(k.lang, ks)
	p.srcs[k] = s
	return s
}

// emit returns the module text of kernels ks in language l.
func (p *Plan) emit(l lang, ks []variant) string {
	switch l {
	case langPTX:
		return p.emitPTX(ks)
	case langOpenCL:
		return p.emitOpenCL(ks)
	}
	panic(fmt.Sprintf("gpu: internal: language %d", l))
}
