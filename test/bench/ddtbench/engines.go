package main

import (
	"fmt"
	"sort"
	"sync"
)

// An Engine prepares pack and unpack functions for one case and one pair of
// buffers. pack moves the case's whole packed stream from typed into packed;
// unpack moves it back. compileNS is the one-off preparation cost the engine
// wants reported (0: none, the field is omitted).
//
// Engines other than the ones in this file register themselves from an init
// function in their own file of package main, for example jit.go:
//
//	func init() {
//		registerEngine("jit", func(c *Case, packed, typed []byte) (pack, unpack func() error, compileNS int64, err error) {
//			...
//		})
//	}
type Engine func(c *Case, packed, typed []byte) (pack, unpack func() error, compileNS int64, err error)

var (
	enginesMu sync.Mutex
	engines   = map[string]Engine{}
)

// registerEngine adds an engine under name; registering a name twice panics
// (a programming error in package main).
func registerEngine(name string, e Engine) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if _, dup := engines[name]; dup {
		panic("ddtbench: engine " + name + " registered twice")
	}
	engines[name] = e
}

func engineNames() []string {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	var out []string
	for n := range engines {
		out = append(out, n)
	}
	order := map[string]int{"manual": 0, "interp": 1, "copy": 2}
	sort.Slice(out, func(i, j int) bool {
		oi, ok1 := order[out[i]]
		oj, ok2 := order[out[j]]
		switch {
		case ok1 && ok2:
			return oi < oj
		case ok1 != ok2:
			return ok1
		}
		return out[i] < out[j]
	})
	return out
}

func init() {
	// manual: the hand-written Go loops of the case.
	registerEngine("manual", func(c *Case, packed, typed []byte) (func() error, func() error, int64, error) {
		p, u := c.Bind(packed, typed)
		return func() error { p(); return nil }, func() error { u(); return nil }, 0, nil
	})
	// interp: ddt's interpreter (bench sets the default JIT mode to off, so
	// the case types are never compiled).
	registerEngine("interp", func(c *Case, packed, typed []byte) (func() error, func() error, int64, error) {
		if c.Type.Compiled() {
			return nil, nil, 0, fmt.Errorf("%v: type unexpectedly compiled", c)
		}
		pack := func() error {
			_, err := c.Type.Pack(packed, typed, c.Count)
			return err
		}
		unpack := func() error {
			_, err := c.Type.Unpack(typed, packed, c.Count)
			return err
		}
		return pack, unpack, 0, nil
	})
	// copy: copy() of the same number of contiguous bytes, the floor.
	registerEngine("copy", func(c *Case, packed, typed []byte) (func() error, func() error, int64, error) {
		n := c.Bytes
		if int64(len(typed)) < n {
			return nil, nil, 0, fmt.Errorf("%v: typed buffer smaller than the packed size", c)
		}
		return func() error { copy(packed[:n], typed[:n]); return nil },
			func() error { copy(typed[:n], packed[:n]); return nil }, 0, nil
	})
}
