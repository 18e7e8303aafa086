package gpu

import (
	"fmt"

	"github.com/weft-hpc/weft/ddt"
)

var errInvalid = ddt.ErrInvalid

// Kernel sources are cached per plan (and plans per canonical IR, plan.go):
// a type committed again, or another type with the same IR, reuses the text
// and, in each device, the module built from it.

type lang uint8

const (
	langPTX lang = iota
	langOpenCL
)

type srcKey struct {
	lang lang
	w    int64
}

// source returns the module text of the plan for the language and word
// size, emitting it on first use.
func (p *Plan) source(k srcKey) string {
	p.srcMu.Lock()
	defer p.srcMu.Unlock()
	if s, ok := p.srcs[k]; ok {
		return s
	}
	if p.srcs == nil {
		p.srcs = map[srcKey]string{}
	}
	var s string
	switch k.lang {
	case langPTX:
		s = p.emitPTX(k.w)
	case langOpenCL:
		s = p.emitOpenCL(k.w)
	default:
		panic(fmt.Sprintf("gpu: internal: language %d", k.lang))
	}
	p.srcs[k] = s
	return s
}
