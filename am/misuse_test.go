package am_test

import (
	"context"
	"testing"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of an engine, with a handler that
// replies to calls, called over and over with drawn bad arguments
// (internal/misuse), returns: no panic, no hang.
func TestMisuse(t *testing.T) {
	ctx := eptest.Ctx(t, 120*time.Second)
	w := eptest.Singleton(t)
	rounds := 20
	if testing.Short() {
		rounds = 6
	}
	for seed := range uint64(rounds) {
		c, err := w.Comm().Dup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e, err := am.Open(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(1, func(ctx context.Context, m *am.Msg) error {
			if m.IsCall() {
				return m.Reply(m.Header())
			}
			_, err := m.Payload()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		p := misuse.New(seed, misuse.Config{Skip: []string{"Close"}})
		for _, bad := range p.Methods(e) {
			t.Errorf("seed %d: %s", seed, bad)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := e.Close(cctx); err != nil {
			t.Logf("seed %d: Close: %v", seed, err)
		}
		cancel()
		if err := c.Free(); err != nil {
			t.Logf("seed %d: Free: %v", seed, err)
		}
	}
}
