package onesided

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestStats: with the world counting (WEFT_STATS), the stats file each
// process writes at Close counts the one-sided operations of its windows
// over an endpoint communicator, per kind, with their bytes: on direct
// stores (an allocated window) and on libfabric (a dynamic one), typed
// and Region forms included, each call once.
func TestStats(t *testing.T) {
	if !launchtest.IsWorker() {
		dir := t.TempDir()
		launchtest.Run(t, 2, "shm", 60*time.Second, "WEFT_STATS="+dir, "WEFT_NODE_TRANSPORT=native")
		for r := range 2 {
			raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("weft-stats.%d.json", r)))
			if err != nil {
				t.Fatal(err)
			}
			var f struct {
				Layers struct {
					Onesided struct {
						Kinds map[string]struct{ Ops, Bytes uint64 }
						Peers []struct{ Rank, Ops, Bytes int }
					}
				}
			}
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			// per window (two): Put 100 + PutTyped 4·8 (one call), Get 100,
			// PutSignal 16+8, Accumulate 8 + FetchAndOp 8 + AccumulateTyped 2·8
			want := map[string][2]uint64{"put": {4, 264}, "get": {2, 200}, "signal": {2, 48}, "atomic": {6, 64}}
			for k, w := range want {
				if g := f.Layers.Onesided.Kinds[k]; g.Ops != w[0] || g.Bytes != w[1] {
					t.Errorf("rank %d: %s %+v, want %d operations of %d bytes in all (file:\n%s)", r, k, g, w[0], w[1], raw)
				}
			}
			// every operation aimed at the other process
			if p := f.Layers.Onesided.Peers; len(p) != 1 || p[0].Rank != 1-r || p[0].Ops != 14 || p[0].Bytes != 576 {
				t.Errorf("rank %d: per target %+v, want 14 operations of 576 bytes to rank %d", r, p, 1-r)
			}
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	ew, err := endpoint.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ew.Close()
	g := ew.Comm()
	right := (g.Rank() + 1) % g.Size()
	col, err := ddt.Vector(4, 1, 2, ddt.Uint64)
	if err == nil {
		err = col.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ddt.Vector(2, 1, 2, ddt.Uint64)
	if err == nil {
		err = pair.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	one := binary.LittleEndian.AppendUint64(nil, 1)
	// An allocated window (direct stores between the two processes).
	w, err := Allocate(ctx, g, 4096)
	if err != nil {
		t.Fatal(err)
	}
	steps := []error{
		w.Put(right, 0, make([]byte, 100)),
		w.PutTyped(right, 512, make([]byte, 32), 4, ddt.Uint64, 1, col),
		w.Get(right, 1024, make([]byte, 100)),
		w.PutSignal(right, 2048, make([]byte, 16), 2560, 1),
		w.Accumulate(right, 3000, AtomicUint64, OpSum, one),
		func() error { _, err := w.FetchAndOp(right, 3008, AtomicUint64, OpSum, 1); return err }(),
		w.AccumulateTyped(right, 3072, AtomicUint64, OpSum, make([]byte, 16), 2, ddt.Uint64, 1, pair),
		w.Put(right, 4000, make([]byte, 200)), // refused: not counted
	}
	for i, err := range steps[:len(steps)-1] {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if steps[len(steps)-1] == nil {
		t.Fatal("a Put past the window's end was taken")
	}
	if err := w.Free(ctx); err != nil {
		t.Fatal(err)
	}
	// A dynamic window: the Region forms, through libfabric, over a
	// communicator whose ranks are the world's reversed (the per-target
	// counts are by world rank).
	sp, err := g.Split(ctx, 0, -g.Rank())
	if err != nil {
		t.Fatal(err)
	}
	d, err := CreateDynamic(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := d.Attach(make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := mine.MarshalBinary()
	all, err := sp.Allgather(ctx, wire)
	if err != nil {
		t.Fatal(err)
	}
	var r Region
	if err := r.UnmarshalBinary(all[1-sp.Rank()]); err != nil {
		t.Fatal(err)
	}
	for i, err := range []error{
		d.PutRegion(r, 0, make([]byte, 100)),
		d.PutTypedRegion(r, 512, make([]byte, 32), 4, ddt.Uint64, 1, col),
		d.GetRegion(r, 1024, make([]byte, 100)),
		d.PutSignalRegion(r, 2048, make([]byte, 16), r, 2560, 1),
		d.AccumulateRegion(r, 3000, AtomicUint64, OpSum, one),
		func() error { _, err := d.FetchAndOpRegion(r, 3008, AtomicUint64, OpSum, 1); return err }(),
		d.AccumulateTypedRegion(r, 3072, AtomicUint64, OpSum, make([]byte, 16), 2, ddt.Uint64, 1, pair),
	} {
		if err != nil {
			t.Fatalf("dynamic step %d: %v", i, err)
		}
	}
	if err := d.Free(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ew.Close(); err != nil {
		t.Fatal(err)
	}
}
