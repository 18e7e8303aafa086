package onesided

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of a window (allocated, created over
// Go memory, dynamic), of a symmetric heap, a team of it and a window
// transport, called over and over with
// drawn bad arguments (internal/misuse), returns: no panic, no hang.
// Regions are drawn among the zero Region and one this rank attached (a
// made-up Region of another rank is a case of its own: docs/onesided.md).
func TestMisuse(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	runRanks(t, 1, func(ctx context.Context, g Group) error {
		for seed := range uint64(rounds) {
			var regions []Region
			p := misuse.New(seed, misuse.Config{
				Skip: []string{"Close"},
				Special: func(r *rand.Rand, t reflect.Type) (reflect.Value, bool) {
					if t != reflect.TypeFor[Region]() {
						return reflect.Value{}, false
					}
					if r.IntN(2) == 0 && len(regions) > 0 {
						return reflect.ValueOf(regions[r.IntN(len(regions))]), true
					}
					return reflect.ValueOf(Region{}), true
				},
			})
			w1, err := Allocate(ctx, g, 4096)
			if err != nil {
				return err
			}
			w2, err := Create(ctx, g, make([]byte, 4096))
			if err != nil {
				return err
			}
			w3, err := CreateDynamic(ctx, g)
			if err != nil {
				return err
			}
			r3, err := w3.Attach(make([]byte, 4096))
			if err != nil {
				return err
			}
			regions = append(regions, r3)
			h, err := NewHeap(ctx, g, 1<<16)
			if err != nil {
				return err
			}
			for _, v := range []any{w1, w2, w3} {
				for _, bad := range misuseWindow(p, v) {
					t.Errorf("seed %d: %s", seed, bad)
				}
			}
			team, err := h.SplitStrided(ctx, 0, 1, 1)
			if err != nil {
				return err
			}
			tr := NewWindowTransport(g)
			for _, v := range []any{h, team, tr} {
				for _, bad := range p.MethodsExcept(v, "Destroy") {
					t.Errorf("seed %d: %s", seed, bad)
				}
			}
			if err := team.Destroy(ctx); err != nil {
				t.Logf("seed %d: team Destroy: %v", seed, err)
			}
			for _, w := range []*Window{w1, w2, w3} {
				if err := w.Free(ctx); err != nil {
					t.Logf("seed %d: Free: %v", seed, err)
				}
			}
			if err := h.Close(ctx); err != nil {
				t.Logf("seed %d: heap Close: %v", seed, err)
			}
		}
		return nil
	})
}

// misuseWindow probes a window's methods but its Free (the heap's Free
// frees a symbol and is probed).
func misuseWindow(p *misuse.Prober, w any) []string {
	return p.MethodsExcept(w, "Free")
}
