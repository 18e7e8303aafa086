package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weft-hpc/weft/endpoint"
)

// TestGraphCreate: a distributed graph with a self-loop and a repeated
// edge is made and gives back its lists; edges that do not agree between
// ranks, and ranks out of range, fail on every rank with ErrInvalid.
func TestGraphCreate(t *testing.T) {
	cartHandles(t, 4, func(ctx context.Context, c *endpoint.Comm) error {
		me, p := c.Rank(), c.Size()
		dst := []int{(me + 1) % p, me, (me + 1) % p}
		src := []int{(me + p - 1) % p, (me + p - 1) % p, me}
		g, err := c.GraphCreate(ctx, src, dst)
		if err != nil {
			return err
		}
		s, d, err := g.Neighbors()
		if err != nil || !slices.Equal(s, src) || !slices.Equal(d, dst) {
			return fmt.Errorf("Neighbors: %v %v %v, want %v %v", s, d, err, src, dst)
		}
		if g.Comm().Size() != p || g.Comm().Rank() != me || g.Comm() == c {
			return fmt.Errorf("the graph's communicator: rank %d of %d", g.Comm().Rank(), g.Comm().Size())
		}
		if err := g.Free(); err != nil {
			return err
		}
		if _, _, err := g.Neighbors(); !errors.Is(err, endpoint.ErrClosed) {
			return fmt.Errorf("Neighbors after Free: %v, want ErrClosed", err)
		}
		for _, tc := range []struct {
			name     string
			src, dst []int
		}{
			{"rank 2 misses a source", map[bool][]int{true: {(me + p - 1) % p}, false: src}[me == 2], dst},
			{"a rank out of range", src, map[bool][]int{true: {p}, false: dst}[me == 1]},
			{"a negative rank", map[bool][]int{true: {-1}, false: src}[me == 3], dst},
		} {
			if g, err := c.GraphCreate(ctx, tc.src, tc.dst); g != nil || !errors.Is(err, endpoint.ErrInvalid) {
				return fmt.Errorf("%s: %v, %v; want ErrInvalid", tc.name, g, err)
			}
		}
		return nil
	})
	var g *endpoint.Graph
	if g.Comm() != nil || g.Free() != nil {
		t.Error("a nil Graph")
	}
	if _, _, err := g.Neighbors(); !errors.Is(err, endpoint.ErrInvalid) {
		t.Errorf("Neighbors of a nil Graph: %v", err)
	}
}
