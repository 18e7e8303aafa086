package endpoint

import (
	"context"
	"encoding/binary"
	"fmt"
)

// Intercommunicators (MPI_Intercomm_create, MPI_Intercomm_merge): a
// communicator joining two disjoint groups, through which a rank of one
// group sends to the ranks of the other, named by their ranks in that
// other group — two programs of an MPMD job coupled, each with its own
// communicator inside.
//
// An intercommunicator is a *Comm whose point-to-point peers are the
// remote group's ranks: its rank arrays (addresses, slots, hosts,
// identities, node links) describe the remote group, and its own rank is
// this rank's in the local group, which is what a message carries as its
// source, so that each side names the other by the other's local ranks.
// Rank and Size are the local group's, RemoteSize the remote one's. The
// calls that only make sense within one group (Barrier, Allgather, Dup,
// Split, topologies, collectives) refuse it. It keeps a private
// duplicate of the local communicator for its own collective steps
// (Merge).

// interInfo is what an intercommunicator adds to a Comm.
type interInfo struct {
	local *Comm    // a private Dup of the local group's communicator
	rids  []uint64 // the remote group's identities, by remote rank
}

// interTag marks the tags of IntercommCreate's leader exchange on the
// peer communicator's collective context, beside CreateGroup's
// (groupTag): tag bit 20.
const interTag = groupTag | 1<<20

// MaxInterTag is the largest tag IntercommCreate takes.
const MaxInterTag = 1<<20 - 1

// intra reports ErrNotSupported for an intercommunicator, for the calls
// that work within one group only.
func (c *Comm) intra(op string) error {
	if c.inter != nil {
		return fmt.Errorf("endpoint: %s on an intercommunicator (Merge it into one communicator first): %w", op, ErrNotSupported)
	}
	return nil
}

// IsInter reports whether c is an intercommunicator.
func (c *Comm) IsInter() bool { return c != nil && c.inter != nil }

// RemoteSize returns the size of an intercommunicator's remote group (0
// for any other communicator).
func (c *Comm) RemoteSize() int {
	if c == nil || c.inter == nil {
		return 0
	}
	return len(c.inter.rids)
}

// RemoteGroup returns an intercommunicator's remote group (nil, the empty
// group, for any other communicator).
func (c *Comm) RemoteGroup() *Group {
	if !c.ok() || c.inter == nil {
		return nil
	}
	return &Group{ids: c.inter.rids, self: c.inter.local.ids[c.rank]}
}

// IntercommCreate joins c's group with another, disjoint one into an
// intercommunicator (MPI_Intercomm_create). It is collective over c, and
// the other group's ranks make the matching call on their own
// communicator. localLeader is a rank of c; the two leaders, ranks of peer
// (remoteLeader is the other leader's rank in peer), exchange the groups
// through peer with tag (0..MaxInterTag), the only communication between
// the groups. Every rank of both groups must be a rank of peer and reach
// it through the same endpoint as c (peer is typically the world
// communicator, or the communicator the handles were made from). On the
// result, ranks of the remote group are the peers of point-to-point
// calls: Send(ctx, buf, r, tag) sends to rank r of the other group.
func (c *Comm) IntercommCreate(ctx context.Context, localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	if err := c.usable("intercomm create"); err != nil {
		return nil, err
	}
	if err := c.intra("intercomm create"); err != nil {
		return nil, err
	}
	if localLeader < 0 || localLeader >= c.size || tag < 0 || tag > MaxInterTag {
		return nil, fmt.Errorf("endpoint: intercomm create: local leader %d of %d ranks, tag %d (0..%d): %w", localLeader, c.size, tag, MaxInterTag, ErrInvalid)
	}
	// The private copy of the local group first: past this collective
	// call a rank that finds something wrong leaves without stranding the
	// others in another one.
	local, err := c.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("endpoint: intercomm create: %w", err)
	}
	ic, err := c.intercomm(ctx, local, localLeader, peer, remoteLeader, tag)
	if err != nil {
		local.Free()
		return nil, err
	}
	return ic, nil
}

// intercomm is IntercommCreate past its checks, local its private copy
// of c.
func (c *Comm) intercomm(ctx context.Context, local *Comm, localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	leader := c.rank == localLeader
	var perr error
	switch {
	case leader && !peer.ok():
		perr = fmt.Errorf("endpoint: intercomm create: the leader's peer communicator is nil or freed: %w", ErrInvalid)
	case leader && (remoteLeader < 0 || remoteLeader >= peer.size || remoteLeader == peer.rank):
		perr = fmt.Errorf("endpoint: intercomm create: remote leader %d of a peer communicator of %d (this leader is %d): %w", remoteLeader, peer.size, peer.rank, ErrInvalid)
	}
	// The local group agrees on its context mask and on the leader's
	// findings; the leader trades the group's with the other leader.
	trade := func(ctx context.Context, b []byte) ([]byte, error) {
		return peer.leaderTrade(ctx, remoteLeader, interTag|tag, b)
	}
	for attempt := 0; ; attempt++ {
		mask, err := local.groupMask(ctx)
		if err != nil {
			return nil, fmt.Errorf("endpoint: intercomm create: %w", err)
		}
		var remote []byte
		if leader && perr == nil {
			remote, perr = trade(ctx, append(mask, idBytes(c.ids)...))
		}
		remote, err = local.fromLeader(ctx, localLeader, remote, perr)
		if err != nil {
			return nil, fmt.Errorf("endpoint: intercomm create: %w", err)
		}
		rmask, rids, err := splitMaskIDs(remote)
		if err != nil {
			return nil, fmt.Errorf("endpoint: intercomm create: %w", err)
		}
		remoteGroup := &Group{ids: rids}
		if remoteGroup.Intersection(local.Group()).Size() > 0 {
			return nil, fmt.Errorf("endpoint: intercomm create: the groups share a rank: %w", ErrInvalid)
		}
		// The remote ranks' addresses, from the peer communicator, which
		// every rank needs (MPI asks it of the leaders only).
		if !peer.ok() || peer.v != c.v {
			return nil, fmt.Errorf("endpoint: intercomm create: every rank needs a peer communicator on the same endpoint as the local one: %w", ErrNotSupported)
		}
		at, err := peer.members("intercomm create", remoteGroup)
		if err != nil {
			return nil, fmt.Errorf("%w (every rank of both groups must be in the peer communicator)", err)
		}
		// Every rank of both groups names the creation alike: by the two
		// groups (in either order) and the tag.
		key := ctxKey{parent: -1, sub: (groupHash(local.Group()) ^ groupHash(remoteGroup)) + uint64(tag)}
		id, err := c.interContext(ctx, local, localLeader, trade, key, attempt, mask, rmask)
		if err != nil {
			return nil, fmt.Errorf("endpoint: intercomm create: %w", err)
		}
		if id < 0 {
			continue
		}
		ic := peer.subset(id, at)
		ic.rank, ic.inter = c.rank, &interInfo{local: local, rids: rids}
		ic.lrank, ic.lsize = c.lrank, c.lsize
		c.v.retain()
		return ic, nil
	}
}

// interContext settles a context id for an intercommunicator step of
// creation key: the lowest id free in both groups' masks, reserved by
// every rank, as agreeContext does within a communicator; local's
// leader (localLeader) learns the other group's verdict through trade.
// It returns -1, having waited, when the groups should try again with
// fresh masks.
func (c *Comm) interContext(ctx context.Context, local *Comm, localLeader int,
	trade func(context.Context, []byte) ([]byte, error), key ctxKey, attempt int, masks ...[]byte) (int, error) {
	id, held, err := c.w.takeContext(key, masks...)
	if err != nil {
		return 0, err
	}
	agreed, err := local.interAgree(ctx, localLeader, trade, held)
	switch {
	case agreed:
		c.w.settled(id)
		return id, nil
	case held:
		c.w.releaseContext(id)
	}
	if err != nil {
		return 0, err
	}
	if attempt+1 >= maxCtxAttempts {
		return 0, fmt.Errorf("no context id agreed in %d attempts (communicators created at once in a process keep colliding): %w", maxCtxAttempts, ErrInvalid)
	}
	if err := ctxBackoff(ctx, attempt); err != nil {
		return 0, err
	}
	return -1, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// interAgree reports whether every rank of both groups holds its
// reservation: local's ranks AND theirs, the leader trades the result
// with the other group's and tells its own ranks.
func (local *Comm) interAgree(ctx context.Context, localLeader int, trade func(context.Context, []byte) ([]byte, error), held bool) (bool, error) {
	oks, err := local.allgather(ctx, []byte{boolByte(held)}, tagGatherLen, tagGatherData)
	if err != nil {
		return false, err
	}
	mine := true
	for _, o := range oks {
		mine = mine && len(o) == 1 && o[0] == 1
	}
	var res []byte
	var perr error
	if local.rank == localLeader {
		var theirs []byte
		if theirs, perr = trade(ctx, []byte{boolByte(mine)}); perr == nil {
			res = []byte{boolByte(mine && len(theirs) == 1 && theirs[0] == 1)}
		}
	}
	got, err := local.fromLeader(ctx, localLeader, res, perr)
	if err != nil {
		return false, err
	}
	return len(got) == 1 && got[0] == 1, nil
}

// Merge makes one communicator of an intercommunicator's two groups
// (MPI_Intercomm_merge). It is collective over both groups. The group
// whose ranks pass high false comes first; every rank of a group must
// pass the same value, and when both groups pass the same, the group of
// the lower-identity leader comes first.
func (c *Comm) Merge(ctx context.Context, high bool) (*Comm, error) {
	if err := c.usable("merge"); err != nil {
		return nil, err
	}
	if c.inter == nil {
		return nil, fmt.Errorf("endpoint: merge of a communicator that is not an intercommunicator: %w", ErrInvalid)
	}
	local := c.inter.local
	h := []byte{0}
	if high {
		h[0] = 1
	}
	// The leaders are rank 0 of each group; they meet on the
	// intercommunicator's own collective context.
	trade := func(ctx context.Context, b []byte) ([]byte, error) { return c.leaderTrade(ctx, 0, interTag, b) }
	var id int
	var first bool
	for attempt := 0; ; attempt++ {
		mask, err := local.groupMask(ctx)
		if err != nil {
			return nil, fmt.Errorf("endpoint: merge: %w", err)
		}
		var remote []byte
		var perr error
		if c.rank == 0 {
			remote, perr = trade(ctx, append(mask, h...))
		}
		remote, err = local.fromLeader(ctx, 0, remote, perr)
		if err != nil {
			return nil, fmt.Errorf("endpoint: merge: %w", err)
		}
		if len(remote) != len(mask)+1 {
			return nil, fmt.Errorf("endpoint: merge: the other group's record is %d bytes: %w", len(remote), ErrInvalid)
		}
		first = !high // this group first
		if rh := remote[len(mask)] != 0; rh == high {
			first = local.ids[0] < c.inter.rids[0]
		}
		if id, err = c.interContext(ctx, local, 0, trade, ctxKey{parent: c.id, sub: 2}, attempt, mask, remote[:len(mask)]); err != nil {
			return nil, fmt.Errorf("endpoint: merge: %w", err)
		}
		if id >= 0 {
			break
		}
	}
	// The merged ranks: this group's from the local communicator, the
	// other's from the intercommunicator, whose arrays describe them.
	m := c.w.newComm(c.v, id, c.mySlot, len(local.ids)+len(c.inter.rids), local.links != nil || c.links != nil)
	if first {
		m.addAll(local)
		m.addAll(c)
		m.rank = local.rank
	} else {
		m.addAll(c)
		m.addAll(local)
		m.rank = len(c.inter.rids) + local.rank
	}
	m.setLocal()
	c.v.retain()
	return m, nil
}

// groupMask ORs the context masks of c's ranks (collective over c).
func (c *Comm) groupMask(ctx context.Context) ([]byte, error) {
	all, err := c.allgather(ctx, c.w.contextMask(), tagGatherLen, tagGatherData)
	if err != nil {
		return nil, fmt.Errorf("agree on a context id: %w", err)
	}
	out := make([]byte, maxContexts/8)
	for r, b := range all {
		if len(b) != len(out) {
			return nil, fmt.Errorf("context mask of rank %d is %d bytes: %w", r, len(b), ErrInvalid)
		}
		for i := range out {
			out[i] |= b[i]
		}
	}
	return out, nil
}

// leaderTrade sends mine to rank other of c and returns what other sent
// (both sides call it), on c's collective context under tag.
func (c *Comm) leaderTrade(ctx context.Context, other, tag int, mine []byte) ([]byte, error) {
	cc := c.collCtx()
	var n [8]byte
	rl, err := c.irecv(n[:], other, tag, cc)
	if err != nil {
		return nil, err
	}
	var ml [8]byte
	binary.LittleEndian.PutUint64(ml[:], uint64(len(mine)))
	sl, err := c.isend(ml[:], other, tag, cc)
	if err != nil {
		return nil, err
	}
	if err := WaitAll(ctx, rl, sl); err != nil {
		return nil, fmt.Errorf("leaders' exchange with rank %d: %w", other, err)
	}
	theirs := make([]byte, binary.LittleEndian.Uint64(n[:]))
	rd, err := c.irecv(theirs, other, tag, cc)
	if err != nil {
		return nil, err
	}
	sd, err := c.isend(mine, other, tag, cc)
	if err != nil {
		return nil, err
	}
	if err := WaitAll(ctx, rd, sd); err != nil {
		return nil, fmt.Errorf("leaders' exchange with rank %d: %w", other, err)
	}
	return theirs, nil
}

// fromLeader hands the leader's data, or its error, to every rank of c
// (collective over c; data and perr matter at the leader only).
func (c *Comm) fromLeader(ctx context.Context, leader int, data []byte, perr error) ([]byte, error) {
	var rec []byte
	if c.rank == leader {
		rec = append([]byte{0}, data...)
		if perr != nil {
			rec = append([]byte{1}, perr.Error()...)
		}
	}
	all, err := c.allgather(ctx, rec, tagGatherLen, tagGatherData)
	if err != nil {
		return nil, err
	}
	got := all[leader]
	switch {
	case len(got) == 0:
		return nil, fmt.Errorf("the leader (rank %d) sent nothing: %w", leader, ErrInvalid)
	case got[0] != 0:
		if perr != nil {
			return nil, perr
		}
		return nil, fmt.Errorf("the leader (rank %d) failed: %s: %w", leader, got[1:], ErrInvalid)
	}
	return got[1:], nil
}

// idBytes encodes identities.
func idBytes(ids []uint64) []byte {
	out := make([]byte, 0, 8*len(ids))
	for _, id := range ids {
		out = binary.LittleEndian.AppendUint64(out, id)
	}
	return out
}

// splitMaskIDs decodes a context mask followed by identities.
func splitMaskIDs(b []byte) ([]byte, []uint64, error) {
	m := maxContexts / 8
	if len(b) < m || (len(b)-m)%8 != 0 || len(b) == m {
		return nil, nil, fmt.Errorf("the other group's record is %d bytes: %w", len(b), ErrInvalid)
	}
	ids := make([]uint64, (len(b)-m)/8)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(b[m+8*i:])
	}
	return b[:m], ids, nil
}
