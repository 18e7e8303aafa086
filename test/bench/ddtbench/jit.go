package main

// Engine "jit": the type compiled to native code by package jit, packed
// through ddt's API like engine "interp" (a copy of the case's type, same bounds,
// committed with JIT mode on). compile_ns is the median of several fresh
// compilations of the type (code cache bypassed, so each one plans,
// generates code and places it in W^X executable memory). The "reuses to
// amortise" figure in docs/perf/jit.md is compile_ns divided by the
// per-pack saving over the interpreter, interp ns − jit ns, of the same run.

import (
	"fmt"
	"slices"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/jit"
)

const jitCompileSamples = 15

func init() {
	// Importing jit registers it as ddt's compiler; the suite's types stay
	// interpreted for engine "interp" because bench sets the default JIT
	// mode to off. This engine commits a copy with JIT mode on.
	registerEngine("jit", func(c *Case, packed, typed []byte) (func() error, func() error, int64, error) {
		ns := make([]int64, 0, jitCompileSamples)
		for range jitCompileSamples {
			d, err := jit.CompileTime(c.Type)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("%v: %w", c, err)
			}
			ns = append(ns, d.Nanoseconds())
		}
		slices.Sort(ns)
		ty, err := ddt.Resized(c.Type, c.Type.LB(), c.Type.Extent())
		if err != nil {
			return nil, nil, 0, fmt.Errorf("%v: %w", c, err)
		}
		if err := ty.SetJIT(ddt.JITOn); err != nil {
			return nil, nil, 0, fmt.Errorf("%v: %w", c, err)
		}
		if err := ty.Commit(); err != nil {
			return nil, nil, 0, fmt.Errorf("%v: %w", c, err)
		}
		if !ty.Compiled() { // WEFT_JIT=off
			return nil, nil, 0, fmt.Errorf("%v: JIT disabled: %w", c, ddt.ErrNotCompiled)
		}
		n := c.Bytes
		pack := func() error {
			_, err := ty.Pack(packed[:n], typed, c.Count)
			return err
		}
		unpack := func() error {
			_, err := ty.Unpack(typed, packed[:n], c.Count)
			return err
		}
		return pack, unpack, max(ns[len(ns)/2], 1), nil
	})
}
