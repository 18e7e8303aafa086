package am_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestStats: with the world counting (WEFT_STATS), the stats file each
// process writes at Close counts its active messages per handler id —
// sent (calls included) with their header and payload bytes, and
// handled — plain and batched.
func TestStats(t *testing.T) {
	for _, agg := range []bool{false, true} {
		t.Run(fmt.Sprintf("aggregation=%v", agg), func(t *testing.T) {
			dir := t.TempDir()
			if launchtest.RunOn(t, 2, "native", 60*time.Second, "WEFT_STATS="+dir) {
				for r := range 2 {
					raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("weft-stats.%d.json", r)))
					if err != nil {
						t.Fatal(err)
					}
					var f struct {
						Layers struct {
							AM map[string]struct{ Sent, Handled, Bytes uint64 }
						}
					}
					if err := json.Unmarshal(raw, &f); err != nil {
						t.Fatal(err)
					}
					// 5 sends of a 2-byte header and 10-byte payload to handler 3;
					// 2 calls of a 4-byte payload to handler 7
					for id, want := range map[string][3]uint64{"3": {5, 5, 60}, "7": {2, 2, 8}} {
						if g := f.Layers.AM[id]; g.Sent != want[0] || g.Handled != want[1] || g.Bytes != want[2] {
							t.Errorf("rank %d: handler %s %+v, want sent %d, handled %d, %d bytes (file:\n%s)", r, id, g, want[0], want[1], want[2], raw)
						}
					}
				}
				return
			}
			w := eptest.InitWorld(t)
			ctx := eptest.Ctx(t, 50*time.Second)
			var opts []am.Option
			if agg {
				opts = append(opts, am.WithAggregation(4096))
			}
			e, err := am.Open(ctx, w.Comm(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			other := 1 - w.Comm().Rank()
			if err := e.Register(3, func(context.Context, *am.Msg) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if err := e.Register(7, func(_ context.Context, m *am.Msg) error { return m.Reply([]byte("ok")) }); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if err := e.Send(ctx, other, 3, []byte("hd"), make([]byte, 10)); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if _, err := e.Call(ctx, other, 7, nil, make([]byte, 4), make([]byte, 8)); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Quiesce(ctx); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
