package collectives_test

import (
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of a collectives handle, of its
// selection table, of a persistent Allreduce and of a tiled all-to-all,
// called over and over with drawn bad arguments (internal/misuse),
// returns: no panic, no hang. (The collectives themselves are generic
// functions, which reflection cannot reach; their bad arguments are
// TestTypedErrors', TestLocalErrors' and TestBadArgumentElsewhere's.)
func TestMisuse(t *testing.T) {
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
		if err := pers.Wait(ctx); err != nil {
			t.Logf("seed %d: persistent Wait: %v", seed, err)
		}
		pers.Free()
		tiled.Free(ctx)
		c.Free()
		comm.Free()
	}
}
