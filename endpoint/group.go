package endpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
)

// Every rank has an identity that is the same in every communicator
// containing it, so that groups taken from different communicators can
// be compared and combined: a rank of the world communicator is its world
// rank; an endpoint made by CreateEndpoints is its process's world rank,
// the number of that process's CreateEndpoints call and its index among
// the call's handles (epIdentity). Dup, Split, Create and the topologies
// keep their ranks' identities.

// epIdentity is the identity of handle i of the call-th CreateEndpoints
// call made by the process of world rank world.
func epIdentity(world int32, call uint32, i int) uint64 {
	return 1<<63 | uint64(world)<<42 | uint64(call&(1<<22-1))<<20 | uint64(i)&(1<<20-1)
}

// Group is an ordered set of ranks (MPI_Group), taken from a communicator
// with Comm.Group and combined with Incl, Excl, Union, Intersection and
// Difference. A group is only a value: making one communicates nothing,
// and it stays valid after the communicator it came from is freed.
// Comm.Create and Comm.CreateGroup make a communicator of a group's
// ranks. The nil *Group is the empty group. A Group is immutable and safe
// for concurrent use.
type Group struct {
	ids  []uint64 // group rank → rank identity
	self uint64   // identity of the handle the group descends from
}

// Relation is how two groups or communicators compare (MPI_Group_compare,
// MPI_Comm_compare).
type Relation int

const (
	// Ident: the same ranks in the same order (for communicators: the same
	// handle).
	Ident Relation = iota
	// Congruent: communicators with the same ranks in the same order but
	// different contexts (a Dup).
	Congruent
	// Similar: the same ranks in a different order.
	Similar
	// Unequal: different ranks.
	Unequal
)

// String returns the relation's name.
func (r Relation) String() string {
	switch r {
	case Ident:
		return "ident"
	case Congruent:
		return "congruent"
	case Similar:
		return "similar"
	case Unequal:
		return "unequal"
	}
	return fmt.Sprintf("Relation(%d)", int(r))
}

// Group returns the group of c's ranks, in c's rank order; its Rank is
// c's rank. It is local. A nil or freed communicator has the empty group.
func (c *Comm) Group() *Group {
	if !c.ok() {
		return nil
	}
	if c.inter != nil {
		return c.inter.local.Group() // an intercommunicator's local group
	}
	return &Group{ids: c.ids, self: c.ids[c.rank]}
}

// Size returns the number of ranks in g.
func (g *Group) Size() int {
	if g == nil {
		return 0
	}
	return len(g.ids)
}

// Rank returns the rank in g of the handle g descends from (the
// communicator handle whose Group started the chain of operations), or
// Undefined if g does not contain it.
func (g *Group) Rank() int {
	if g == nil {
		return Undefined
	}
	return g.index(g.self)
}

// index returns the group rank of identity id, or Undefined.
func (g *Group) index(id uint64) int {
	if i := slices.Index(g.ids, id); i >= 0 {
		return i
	}
	return Undefined
}

// derive returns a group of ids that descends from g.
func (g *Group) derive(ids []uint64) *Group {
	var self uint64
	if g != nil {
		self = g.self
	}
	if len(ids) == 0 && g == nil {
		return nil
	}
	return &Group{ids: ids, self: self}
}

// checkRanks reports an error unless every rank is one of g's, once.
func (g *Group) checkRanks(op string, ranks []int) error {
	seen := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		if r < 0 || r >= g.Size() {
			return fmt.Errorf("endpoint: group %s: rank %d not in a group of %d: %w", op, r, g.Size(), ErrInvalid)
		}
		if seen[r] {
			return fmt.Errorf("endpoint: group %s: rank %d given twice: %w", op, r, ErrInvalid)
		}
		seen[r] = true
	}
	return nil
}

// Incl returns the group of g's ranks listed, in the order listed
// (MPI_Group_incl): rank i of the result is rank ranks[i] of g. A rank
// outside g or listed twice is an error.
func (g *Group) Incl(ranks ...int) (*Group, error) {
	if err := g.checkRanks("incl", ranks); err != nil {
		return nil, err
	}
	ids := make([]uint64, len(ranks))
	for i, r := range ranks {
		ids[i] = g.ids[r]
	}
	return g.derive(ids), nil
}

// Excl returns g without the ranks listed, the others in g's order
// (MPI_Group_excl). A rank outside g or listed twice is an error.
func (g *Group) Excl(ranks ...int) (*Group, error) {
	if err := g.checkRanks("excl", ranks); err != nil {
		return nil, err
	}
	drop, _ := g.Incl(ranks...)
	return g.filter(drop, false), nil
}

// list is g's ranks' identities (nil for the empty group): rank i's is
// element i.
func (g *Group) list() []uint64 {
	if g == nil {
		return nil
	}
	return g.ids
}

// ranks maps g's identities to their ranks in g (empty for the empty
// group): membership tests cost one lookup, not a scan of the group.
func (g *Group) ranks() map[uint64]int {
	m := make(map[uint64]int, g.Size())
	for r, id := range g.list() {
		m[id] = r
	}
	return m
}

// filter returns g's ranks that o has (keep) or lacks (!keep), in g's
// order, as a group descending from g.
func (g *Group) filter(o *Group, keep bool) *Group {
	in := o.ranks()
	var out []uint64
	for _, id := range g.list() {
		if _, ok := in[id]; ok == keep {
			out = append(out, id)
		}
	}
	return g.derive(out)
}

// Union returns g's ranks followed by those of o that g lacks, in o's
// order (MPI_Group_union).
func (g *Group) Union(o *Group) *Group {
	return g.derive(append(slices.Clone(g.list()), o.filter(g, false).list()...))
}

// Intersection returns g's ranks that o also has, in g's order
// (MPI_Group_intersection).
func (g *Group) Intersection(o *Group) *Group { return g.filter(o, true) }

// Difference returns g's ranks that o lacks, in g's order
// (MPI_Group_difference).
func (g *Group) Difference(o *Group) *Group { return g.filter(o, false) }

// TranslateRanks returns the ranks in to of g's ranks listed
// (MPI_Group_translate_ranks): Undefined for one that to lacks, ProcNull
// for ProcNull. A rank outside g is an error.
func (g *Group) TranslateRanks(ranks []int, to *Group) ([]int, error) {
	at := to.ranks()
	out := make([]int, len(ranks))
	for i, r := range ranks {
		switch {
		case r == ProcNull:
			out[i] = ProcNull
		case r < 0 || r >= g.Size():
			return nil, fmt.Errorf("endpoint: group translate: rank %d not in a group of %d: %w", r, g.Size(), ErrInvalid)
		default:
			t, ok := at[g.ids[r]]
			if !ok {
				t = Undefined
			}
			out[i] = t
		}
	}
	return out, nil
}

// Compare returns Ident if g and o hold the same ranks in the same
// order, Similar if in another order, Unequal otherwise.
func (g *Group) Compare(o *Group) Relation {
	switch {
	case slices.Equal(g.list(), o.list()):
		return Ident
	case g.Size() == o.Size() && g.filter(o, true).Size() == g.Size():
		return Similar
	}
	return Unequal
}

// Compare returns Ident if c and o are the same handle, Congruent if
// they have the same ranks in the same order (a Dup), Similar if the
// same ranks in another order, Unequal otherwise (MPI_Comm_compare).
func (c *Comm) Compare(o *Comm) Relation {
	if c == o && c.ok() {
		return Ident
	}
	r := c.Group().Compare(o.Group())
	if r == Ident {
		return Congruent
	}
	return r
}

// groupHash digests g's ranks in order, for the check that every caller
// of Create passed the same group.
func groupHash(g *Group) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, id := range g.list() {
		binary.LittleEndian.PutUint64(b[:], id)
		h.Write(b[:])
	}
	return h.Sum64()
}

// members returns, for each rank of g, its rank in c, or an error naming
// a rank c lacks.
func (c *Comm) members(op string, g *Group) ([]int, error) {
	at := (&Group{ids: c.ids}).ranks()
	out := make([]int, g.Size())
	for i, id := range g.list() {
		r, ok := at[id]
		if !ok {
			return nil, fmt.Errorf("endpoint: %s: rank %d of the group is not in the communicator: %w", op, i, ErrInvalid)
		}
		out[i] = r
	}
	return out, nil
}

// Create returns a communicator of g's ranks, in g's order, with a new
// context (MPI_Comm_create). It is collective over c: every rank of c
// calls it with the same group, whose ranks must all be c's; a rank
// outside g gets nil. Ranks that passed different groups all get an
// error.
func (c *Comm) Create(ctx context.Context, g *Group) (*Comm, error) {
	if err := c.usable("create"); err != nil {
		return nil, err
	}
	if err := c.intra("create"); err != nil {
		return nil, err
	}
	members, merr := c.members("create", g)
	var rec [9]byte
	binary.LittleEndian.PutUint64(rec[:], groupHash(g))
	if merr != nil {
		rec[8] = 1
	}
	id, extras, err := c.allocContext(ctx, rec[:])
	if err != nil {
		return nil, err
	}
	if err := agreeGroup("create", extras, rec[:], merr); err != nil {
		c.w.releaseContext(id)
		return nil, err
	}
	if !slices.Contains(members, c.rank) {
		c.w.releaseContext(id)
		return nil, nil
	}
	c.v.retain()
	return c.subset(id, members), nil
}

// agreeGroup checks the records of Create's or CreateGroup's callers:
// every one must have named the same group, and every one must have found
// its ranks (local, this caller's own finding).
func agreeGroup(op string, extras [][]byte, mine []byte, local error) error {
	if local != nil {
		return local
	}
	for r, b := range extras {
		switch {
		case len(b) != len(mine):
			return fmt.Errorf("endpoint: %s: record of rank %d is %d bytes: %w", op, r, len(b), ErrInvalid)
		case b[8] != 0:
			return fmt.Errorf("endpoint: %s: rank %d found a rank of the group outside the communicator: %w", op, r, ErrInvalid)
		case binary.LittleEndian.Uint64(b) != binary.LittleEndian.Uint64(mine):
			return fmt.Errorf("endpoint: %s: rank %d passed another group than this rank: %w", op, r, ErrInvalid)
		}
	}
	return nil
}

// MaxGroupTag is the largest tag CreateGroup takes.
const MaxGroupTag = 1<<20 - 1

// CreateGroup returns a communicator of g's ranks, in g's order, with a
// new context (MPI_Comm_create_group). Unlike Create it is collective
// over g's ranks alone: the other ranks of c take no part. Every caller
// must be in g and pass the same group, whose ranks must all be c's, and
// the same tag (0..MaxGroupTag); calls on overlapping groups that may run
// at the same time (from goroutines driving different handles) must use
// different tags.
func (c *Comm) CreateGroup(ctx context.Context, g *Group, tag int) (*Comm, error) {
	if err := c.usable("create group"); err != nil {
		return nil, err
	}
	if err := c.intra("create group"); err != nil {
		return nil, err
	}
	if tag < 0 || tag > MaxGroupTag {
		return nil, fmt.Errorf("endpoint: create group: tag %d outside 0..%d: %w", tag, MaxGroupTag, ErrInvalid)
	}
	members, err := c.members("create group", g)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(members, c.rank) {
		return nil, fmt.Errorf("endpoint: create group: rank %d of the communicator is not in the group: %w", c.rank, ErrInvalid)
	}
	// The members agree on a context id among themselves, through a
	// provisional communicator of them on c's collective context whose
	// exchange uses tags of their own (groupTag).
	p := c.subset(c.id, members)
	var rec [9]byte
	binary.LittleEndian.PutUint64(rec[:], groupHash(g))
	key := ctxKey{parent: c.id, sub: groupHash(g)<<24 | uint64(tag)<<2 | 3}
	id, extras, err := p.agreeContext(ctx, key, rec[:], groupTag|tag, groupTag|tag)
	if err != nil {
		return nil, err
	}
	if err := agreeGroup("create group", extras, rec[:], nil); err != nil {
		c.w.releaseContext(id)
		return nil, err
	}
	c.v.retain()
	return c.subset(id, members), nil
}

// groupTag marks the collective-context tags of CreateGroup's exchange,
// above those of Barrier and Allgather.
const groupTag = (TagUB + 1) >> 1

// SplitKind names the partition SplitType makes.
type SplitKind int

const (
	// SplitNode: the ranks on one node, those that can share memory
	// (MPI_COMM_TYPE_SHARED).
	SplitNode SplitKind = iota + 1
	// SplitProcess: the ranks of one process (the endpoints of one
	// CreateEndpoints caller, or one rank of the world).
	SplitProcess
)

// String returns the kind's name.
func (k SplitKind) String() string {
	switch k {
	case SplitNode:
		return "node"
	case SplitProcess:
		return "process"
	}
	return fmt.Sprintf("SplitKind(%d)", int(k))
}

// SplitType partitions c by where its ranks run (MPI_Comm_split_type):
// the ranks of one node (SplitNode) or of one process (SplitProcess) form
// a new communicator, ordered by key (ties by rank in c). Collective over
// c; every rank must pass the same kind.
func (c *Comm) SplitType(ctx context.Context, kind SplitKind, key int) (*Comm, error) {
	if err := c.usable("split type"); err != nil {
		return nil, err
	}
	// Colors of the two kinds differ, so ranks that passed different
	// kinds never share a communicator; a rank with an unknown kind still
	// takes part (Undefined), so the others do not wait for it.
	switch kind {
	case SplitNode:
		return c.Split(ctx, 2*int(c.hosts[c.rank]), key)
	case SplitProcess:
		return c.Split(ctx, 2*int(c.world[c.rank])+1, key)
	}
	if _, err := c.Split(ctx, Undefined, key); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("endpoint: split type: kind %d unknown: %w", int(kind), ErrInvalid)
}
