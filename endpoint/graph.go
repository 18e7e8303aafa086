package endpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
)

// Topology is a communicator whose ranks know their neighbours, as the
// neighbourhood collectives (package collectives) need: a Cart or a
// Graph.
type Topology interface {
	// Comm is the topology's communicator.
	Comm() *Comm
	// Neighbors returns the ranks this one receives from (sources) and
	// sends to (destinations), in the order of the neighbourhood
	// collectives' blocks; ProcNull entries take part in nothing.
	Neighbors() (sources, destinations []int, err error)
}

// Neighbors returns, for each dimension in order, the rank one step down
// and the rank one step up (Shift(i, 1)'s source and destination;
// ProcNull past a non-periodic border), as both the sources and the
// destinations: the neighbourhood collectives exchange block 2i with the
// rank below and block 2i+1 with the rank above.
func (g *Cart) Neighbors() (sources, destinations []int, err error) {
	if err := g.usable("cart neighbours"); err != nil {
		return nil, nil, err
	}
	nb := make([]int, 0, 2*len(g.dims))
	for i := range g.dims {
		lo, hi, err := g.Shift(i, 1)
		if err != nil {
			return nil, nil, err
		}
		nb = append(nb, lo, hi)
	}
	return nb, slices.Clone(nb), nil
}

// Graph is a communicator with a distributed graph topology, as
// MPI_Dist_graph_create_adjacent makes: each rank names the ranks it
// receives from and the ranks it sends to, in an order of its choosing
// that the neighbourhood collectives keep. An edge may appear more than
// once (several blocks between the same pair, paired in the order they
// appear in the lists). A Graph is used like the Comm it holds.
type Graph struct {
	comm           *Comm
	sources, dests []int
}

// GraphCreate builds a distributed graph topology over c (MPI_Dist_graph_
// create_adjacent without reorder: ranks keep their numbers). sources
// lists the ranks of c this rank receives from, destinations those it
// sends to. Collective over c: the ranks check that the edges agree (rank
// b lists a as often among its sources as a lists b among its
// destinations), and all return the same error wrapping ErrInvalid when
// they do not, or when a rank is out of range. The graph gets a
// communicator of its own (a Dup of c).
func (c *Comm) GraphCreate(ctx context.Context, sources, destinations []int) (*Graph, error) {
	if err := c.usable("graph create"); err != nil {
		return nil, err
	}
	if err := c.intra("graph create"); err != nil {
		return nil, err
	}
	// Every rank's destinations, so that each can count the edges that
	// end at it; one bad list fails every rank alike.
	enc := binary.LittleEndian.AppendUint32(nil, uint32(len(destinations)))
	bad := false
	for _, lst := range [][]int{destinations, sources} {
		for _, r := range lst {
			if r < 0 || r >= c.size {
				bad = true
			}
		}
	}
	if bad {
		enc = binary.LittleEndian.AppendUint32(nil, ^uint32(0))
	} else {
		for _, d := range destinations {
			enc = binary.LittleEndian.AppendUint32(enc, uint32(d))
		}
	}
	all, err := c.Allgather(ctx, enc)
	if err != nil {
		return nil, fmt.Errorf("endpoint: graph create: exchange the edges: %w", err)
	}
	in := make([]int, c.size) // edges into this rank, by source
	var odd []int
	for r, b := range all {
		n := binary.LittleEndian.Uint32(b)
		if n == ^uint32(0) || len(b) != 4+4*int(n) {
			odd = append(odd, r)
			continue
		}
		for k := range int(n) {
			if int(binary.LittleEndian.Uint32(b[4+4*k:])) == c.rank {
				in[r]++
			}
		}
	}
	if odd != nil {
		return nil, fmt.Errorf("endpoint: graph create: ranks %v named ranks outside 0..%d: %w", odd, c.size-1, ErrInvalid)
	}
	for _, s := range sources {
		in[s]--
	}
	agreeing := byte(1)
	for _, k := range in {
		if k != 0 {
			agreeing = 0
		}
	}
	votes, err := c.Allgather(ctx, []byte{agreeing})
	if err != nil {
		return nil, fmt.Errorf("endpoint: graph create: compare the edges: %w", err)
	}
	odd = odd[:0]
	for r, v := range votes {
		if v[0] != 1 {
			odd = append(odd, r)
		}
	}
	if len(odd) > 0 {
		return nil, fmt.Errorf("endpoint: graph create: the sources of ranks %v do not match the destinations the other ranks name: %w", odd, ErrInvalid)
	}
	gc, err := c.Dup(ctx)
	if err != nil {
		return nil, err
	}
	return &Graph{comm: gc, sources: slices.Clone(sources), dests: slices.Clone(destinations)}, nil
}

// Comm returns the graph's communicator (nil for a nil Graph).
func (g *Graph) Comm() *Comm {
	if g == nil {
		return nil
	}
	return g.comm
}

// Neighbors returns copies of this rank's sources and destinations, as
// GraphCreate was given them (MPI_Dist_graph_neighbors).
func (g *Graph) Neighbors() (sources, destinations []int, err error) {
	if g == nil {
		return nil, nil, fmt.Errorf("endpoint: graph neighbours on a nil Graph: %w", ErrInvalid)
	}
	if err := g.comm.usable("graph neighbours"); err != nil {
		return nil, nil, err
	}
	return slices.Clone(g.sources), slices.Clone(g.dests), nil
}

// Free frees the graph's communicator (Comm.Free). Freeing a nil Graph
// does nothing.
func (g *Graph) Free() error {
	if g == nil {
		return nil
	}
	return g.comm.Free()
}
