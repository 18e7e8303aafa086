package main

// Engine "jit": the type compiled to native code by package jit, called
// through the same ddt.Kernel interface ddt uses. compile_ns is the median of
// several fresh compilations of the case's IR (code cache bypassed, so each
// one plans, generates code and places it in W^X executable memory). The
// "reuses to amortise" figure in docs/perf/jit.md is compile_ns divided by
// the per-pack saving over the interpreter, interp ns − jit ns, of the same
// run.

import (
	"fmt"
	"slices"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/jit"
)

const jitCompileSamples = 15

func init() {
	// Importing jit registers it as ddt's compiler; the suite's types must
	// stay interpreted for engine "interp", so unregister it. This engine
	// compiles explicitly below.
	jit.Disable()
	registerEngine("jit", func(c *Case, packed, typed []byte) (func() error, func() error, int64, error) {
		ir := c.Type.IR()
		if ir == nil {
			return nil, nil, 0, fmt.Errorf("%v: type not committed", c)
		}
		var k ddt.Kernel
		ns := make([]int64, 0, jitCompileSamples)
		for range jitCompileSamples {
			kk, d, err := jit.CompileIR(ir)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("%v: %w", c, err)
			}
			k = kk
			ns = append(ns, d.Nanoseconds())
		}
		slices.Sort(ns)
		n := c.Bytes
		pack := func() error {
			_, err := k.Pack(packed[:n], typed, 0, c.Count, 0)
			return err
		}
		unpack := func() error {
			_, err := k.Unpack(typed, packed[:n], 0, c.Count, 0)
			return err
		}
		return pack, unpack, max(ns[len(ns)/2], 1), nil
	})
}
