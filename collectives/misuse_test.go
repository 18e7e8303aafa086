package collectives_test

import (
	"context"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of a collectives handle, of its
// selection table, of a persistent Allreduce and of a tiled all-to-all,
// and every collective (the generic ones for float64) over a handle of
// one rank, called over and over with drawn bad arguments
// (internal/misuse), returns: no panic, no hang.
func TestMisuse(t *testing.T) {
	release := func(v any) { // requests that a call started: completed, persistent ones freed
		switch x := v.(type) {
		case *C.Request:
			if x != nil {
				wctx, cancel := context.WithTimeout(context.Background(), time.Second)
				x.Wait(wctx)
				cancel()
			}
		case *C.Persistent:
			x.Free()
		}
	}
	ctx := eptest.Ctx(t, 120*time.Second)
	w := eptest.Singleton(t)
	tab, err := C.ParseTable(strings.NewReader("weft-colltable 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(12) {
		comm, err := w.Comm().Dup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := C.New(ctx, comm)
		if err != nil {
			t.Fatal(err)
		}
		send, recv := make([]float64, 8), make([]float64, 8)
		pers, err := C.AllreduceInit(c, send, recv, C.Sum[float64]())
		if err != nil {
			t.Fatal(err)
		}
		tiled, err := C.NewTiledAlltoall[float64](ctx, c, 4, 16)
		if err != nil {
			t.Fatal(err)
		}
		p := misuse.New(seed, misuse.Config{Skip: []string{"Free"},
			// A nil io.Writer panics in WriteTo, as everywhere in Go.
			Special: func(_ *rand.Rand, t reflect.Type) (reflect.Value, bool) {
				return reflect.ValueOf(io.Discard), t == reflect.TypeFor[io.Writer]()
			}})
		for _, v := range []any{c, tab, pers, tiled} {
			for _, bad := range p.Methods(v) {
				t.Errorf("seed %d: %s", seed, bad)
			}
		}
		// Every collective (float64 where generic), each on a fresh handle
		// (a failed call leaves its handle failed), drawn most of the time
		// among the arguments.
		for _, name := range sortedNames(collectiveFuncs()) {
			fc, err := C.New(ctx, comm)
			if err != nil {
				t.Fatal(err)
			}
			fp := misuse.New(seed, misuse.Config{Special: misuseColl(fc), Release: release})
			for _, bad := range fp.Funcs(map[string]any{name: collectiveFuncs()[name]}) {
				t.Errorf("seed %d: %s", seed, bad)
			}
			fc.Free()
		}
		if err := pers.Wait(ctx); err != nil {
			t.Logf("seed %d: persistent Wait: %v", seed, err)
		}
		pers.Free()
		tiled.Free(ctx)
		c.Free()
		comm.Free()
	}
}

// TestMisuseAlone: every collective (float64 where generic), called with
// drawn arguments on one handle of two whose partner never joins, each on
// a fresh pair, ends with an error when its context does (20 ms), or at
// once for bad arguments: no panic, no hang.
func TestMisuseAlone(t *testing.T) {
	ctx := eptest.Ctx(t, 120*time.Second)
	w := eptest.Singleton(t)
	eps, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, e := range eps {
			e.Free()
		}
	}()
	for k, name := range sortedNames(collectiveFuncs()) {
		for seed := range uint64(3) {
			cs := make([]*C.Coll, 2)
			for i, err := range eptest.Each(ctx, 2, func(ctx context.Context, i int) (err error) {
				cs[i], err = C.New(ctx, eps[i])
				return err
			}) {
				if err != nil {
					t.Fatalf("New on handle %d: %v", i, err)
				}
			}
			fp := misuse.New(uint64(k)*3+seed, misuse.Config{Special: misuseColl(cs[0]), CtxTimeout: 20 * time.Millisecond, Wait: 20 * time.Second})
			for _, bad := range fp.Funcs(map[string]any{name: collectiveFuncs()[name]}) {
				t.Error(bad)
			}
			for _, c := range cs {
				c.Free()
			}
		}
	}
}

func sortedNames(m map[string]any) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
