package collectives

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// The v-collectives' data movement on bytes (Gatherv, Scatterv,
// Allgatherv and their typed forms, which pack first): flat, or through
// the process level of the hierarchy. In the hierarchical form the ranks
// of one process publish their buffers and the rank blocks of the whole
// (vblock) in their slots; their leader moves the blocks of all of them
// in one message per pair of processes, straight to the other processes'
// leaders on the private communicator (within a node through endpoint's
// node transport), and copies the blocks into its members' buffers. Every
// message starts with the byte length of each rank block it carries, so
// that counts that disagree between ranks are found (ErrInvalid) as the
// flat algorithms find them (a receive of the wrong length). The node
// segment is not used: its steps move one block size per rank, and the
// blocks of a v-collective differ.

// vcall is a v-collective ready to run on bytes.
type vcall struct {
	s     callSig
	mine  []byte             // this rank's block: sent (gather, allgather) or received into (scatter)
	block func(r int) []byte // rank r's block of the whole: at the root (gather, scatter), at every rank (allgather)
	root  int
	// after runs on this rank once its data is in place (unpack), may be nil
	after func() error
}

// hierV reports whether the v-collectives take the hierarchical path: a
// process holds several ranks of the communicator and the mode allows
// it (for Allgatherv k is CollAllgatherv and its algorithm must be Auto
// under HierAuto; Gatherv and Scatterv have no choice of algorithm).
func (c *Coll) hierV(k Collective) bool {
	h := c.hier
	if h == nil || h.first[h.procs] == h.procs {
		return false
	}
	switch c.cfg.hier {
	case HierOn:
		return true
	case HierAuto:
		return k == 0 || c.cfg.alg[k] == Auto
	}
	return false
}

func (v *vcall) finish() error {
	if v.after == nil {
		return nil
	}
	return v.after()
}

// runGatherv readies and runs a gatherv of bytes, and ends the call.
func (c *Coll) runGatherv(ctx context.Context, v *vcall) error {
	if c.hierV(0) {
		return hierGatherv(ctx, c, v)
	}
	v.s.alg = Linear
	if err := c.ready(ctx, v.s); err != nil {
		return c.fail(err)
	}
	root := v.root
	if c.rank != root {
		if err := c.send(v.mine, root); err != nil {
			return c.fail(err)
		}
		return c.done(c.wait(ctx))
	}
	for r := 0; r < c.size; r++ {
		if r != root {
			if err := c.recv(v.block(r), r); err != nil {
				return c.fail(err)
			}
		}
	}
	memcopy.Copy(v.block(root), v.mine)
	if err := c.wait(ctx); err != nil {
		return c.fail(err)
	}
	return c.done(v.finish())
}

// runScatterv readies and runs a scatterv of bytes, and ends the call.
func (c *Coll) runScatterv(ctx context.Context, v *vcall) error {
	if c.hierV(0) {
		return hierScatterv(ctx, c, v)
	}
	v.s.alg = Linear
	if err := c.ready(ctx, v.s); err != nil {
		return c.fail(err)
	}
	root := v.root
	if c.rank != root {
		if err := c.recv(v.mine, root); err != nil {
			return c.fail(err)
		}
		if err := c.wait(ctx); err != nil {
			return c.fail(err)
		}
		return c.done(v.finish())
	}
	for i := 1; i < c.size; i++ {
		r := (root + i) % c.size
		if err := c.send(v.block(r), r); err != nil {
			return c.fail(err)
		}
	}
	memcopy.Copy(v.mine, v.block(root))
	if err := c.wait(ctx); err != nil {
		return c.fail(err)
	}
	return c.done(v.finish())
}

// runAllgatherv readies and runs an allgatherv of bytes (total: the bytes
// of the whole, which every rank knows), and ends the call. Small
// results: every rank sends to every other at once; large ones: the
// ring.
func (c *Coll) runAllgatherv(ctx context.Context, v *vcall, total int) error {
	if c.hierV(CollAllgatherv) && (c.hier.procs == 1 || total < c.cfg.large[CollAllgatherv]) {
		return hierAllgatherv(ctx, c, v)
	}
	alg := c.cfg.pick(CollAllgatherv, total, c.size)
	v.s.alg = alg
	if err := c.ready(ctx, v.s); err != nil {
		return c.fail(err)
	}
	me, p := c.rank, c.size
	memcopy.Copy(v.block(me), v.mine)
	if alg == Ring {
		left, right := (me-1+p)%p, (me+1)%p
		for s := 0; s < p-1; s++ {
			sb, rb := (me-s+p)%p, (me-s-1+p)%p
			if err := c.sendrecv(ctx, v.block(sb), right, v.block(rb), left); err != nil {
				return c.fail(err)
			}
		}
		return c.done(v.finish())
	}
	for i := 1; i < p; i++ {
		if err := c.recv(v.block((me-i+p)%p), (me-i+p)%p); err != nil {
			return c.fail(err)
		}
	}
	for i := 1; i < p; i++ {
		if err := c.send(v.block(me), (me+i)%p); err != nil {
			return c.fail(err)
		}
	}
	if err := c.wait(ctx); err != nil {
		return c.fail(err)
	}
	return c.done(v.finish())
}

// procLeaders returns the communicator rank of each process's leader.
func (h *hier) procLeaders() []int {
	ls := make([]int, h.procs)
	for r, j := range h.procOf {
		if h.local[r] == 0 {
			ls[j] = r
		}
	}
	return ls
}

// procRanks returns the ranks of process j in rank order.
func (h *hier) procRanks(j int) []int {
	rs := make([]int, h.first[j+1]-h.first[j])
	for r, q := range h.procOf {
		if q == j {
			rs[h.local[r]] = r
		}
	}
	return rs
}

// vmsgLen is the length of a message carrying blocks of the given sizes:
// a header of one 8-byte length per block, then the blocks.
func vmsgLen(sizes func(k int) int, n int) int {
	t := 8 * n
	for k := 0; k < n; k++ {
		t += sizes(k)
	}
	return t
}

// vpack writes the header and the blocks into msg (vmsgLen bytes).
func vpack(msg []byte, blocks func(k int) []byte, n int) {
	at := 8 * n
	for k := 0; k < n; k++ {
		b := blocks(k)
		binary.LittleEndian.PutUint64(msg[8*k:], uint64(len(b)))
		memcopy.Copy(msg[at:], b)
		at += len(b)
	}
}

// vcheck checks a received message's header against the expected block
// sizes (ranks names the blocks' ranks, whose the expectation, for the
// error).
func vcheck(msg []byte, ranks []int, sizes func(k int) int, what, whose string) error {
	for k, r := range ranks {
		if got := int(binary.LittleEndian.Uint64(msg[8*k:])); got != sizes(k) {
			return fmt.Errorf("%s: rank %d's block has %d bytes, %s say %d: %w", what, r, got, whose, sizes(k), ErrInvalid)
		}
	}
	return nil
}

// vunpack calls put with each block of a checked message.
func vunpack(msg []byte, n int, sizes func(k int) int, put func(k int, b []byte)) {
	at := 8 * n
	for k := 0; k < n; k++ {
		put(k, msg[at:at+sizes(k)])
		at += sizes(k)
	}
}

// vArrive opens a hierarchical v-collective: this rank's layout goes in
// its slot, then it arrives with in and out (hierArrive). It reports
// whether this rank leads its process in the call; otherwise (a member,
// or a failure) the rank is done and its caller returns hierEnd(err).
func vArrive(ctx context.Context, c *Coll, v *vcall, in, out []byte) (bool, error) {
	if err := c.hierReady(ctx, v.s); err != nil {
		return false, err
	}
	c.hier.g.slots[c.hier.li].vblock = v.block
	leader, err := c.hierArrive(ctx, in, out)
	if !leader && err == nil {
		err = v.finish()
	}
	return leader && err == nil, err
}

// hierGatherv: each process leader sends its ranks' blocks to the leader
// of the root's process in one message; that leader checks every block
// against the root's counts and copies them into the root's buffer.
func hierGatherv(ctx context.Context, c *Coll, v *vcall) error {
	lead, err := vArrive(ctx, c, v, v.mine, nil)
	if !lead {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	rp, rl, _ := h.place(v.root)
	me := h.procOf[c.rank]
	nm := len(g.slots)
	send := func(k int) []byte { return g.slots[k].send }
	if me != rp {
		msg := c.buf(1, vmsgLen(func(k int) int { return len(send(k)) }, nm))
		vpack(msg, send, nm)
		if err = c.send(msg, h.procLeaders()[rp]); err == nil {
			err = c.wait(ctx)
		}
		if err == nil {
			err = c.hierRelease(func() {})
		}
		return c.hierEnd(err)
	}
	block := g.slots[rl].vblock
	for k := 0; k < nm; k++ {
		if want := len(block(g.ranks[k])); len(send(k)) != want {
			return c.hierEnd(fmt.Errorf("gatherv: rank %d sends %d bytes, the root's counts say %d: %w", g.ranks[k], len(send(k)), want, ErrInvalid))
		}
	}
	leaders := h.procLeaders()
	msgs := make([][]byte, h.procs)
	ranks := make([][]int, h.procs)
	sizes := func(j int) func(k int) int { return func(k int) int { return len(block(ranks[j][k])) } }
	need := 0
	for j := range h.procs {
		if j != me {
			ranks[j] = h.procRanks(j)
			need += vmsgLen(sizes(j), len(ranks[j]))
		}
	}
	scratch, at := c.buf(1, need), 0
	for j := range h.procs {
		if j == me {
			continue
		}
		n := vmsgLen(sizes(j), len(ranks[j]))
		msgs[j] = scratch[at : at+n : at+n]
		at += n
		if err = c.recv(msgs[j], leaders[j]); err != nil {
			return c.hierEnd(err)
		}
	}
	if err = c.wait(ctx); err != nil {
		return c.hierEnd(err)
	}
	for j := range h.procs {
		if j != me {
			if err := vcheck(msgs[j], ranks[j], sizes(j), "gatherv", "the root's counts"); err != nil {
				return c.hierEnd(err)
			}
		}
	}
	err = c.hierRelease(func() {
		for k := 0; k < nm; k++ {
			memcopy.Copy(block(g.ranks[k]), send(k))
		}
		for j := range h.procs {
			if j != me {
				vunpack(msgs[j], len(ranks[j]), sizes(j), func(k int, b []byte) { memcopy.Copy(block(ranks[j][k]), b) })
			}
		}
	})
	if err == nil && c.rank == v.root {
		err = v.finish()
	}
	return c.hierEnd(err)
}

// hierScatterv: the leader of the root's process sends every other
// process leader its ranks' blocks of the root's buffer in one message;
// each leader checks them against its members' buffers and copies them
// in.
func hierScatterv(ctx context.Context, c *Coll, v *vcall) error {
	lead, err := vArrive(ctx, c, v, nil, v.mine)
	if !lead {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	rp, rl, _ := h.place(v.root)
	me := h.procOf[c.rank]
	nm := len(g.slots)
	recv := func(k int) []byte { return g.slots[k].recv }
	var msg []byte
	if me != rp {
		size := func(k int) int { return len(recv(k)) }
		msg = c.buf(1, vmsgLen(size, nm))
		if err = c.recv(msg, h.procLeaders()[rp]); err == nil {
			err = c.wait(ctx)
		}
		if err == nil {
			err = vcheck(msg, g.ranks, size, "scatterv", "the receive counts")
		}
		if err == nil {
			err = c.hierRelease(func() {
				vunpack(msg, nm, size, func(k int, b []byte) { memcopy.Copy(recv(k), b) })
			})
		}
		if err == nil {
			err = v.finish()
		}
		return c.hierEnd(err)
	}
	block := g.slots[rl].vblock
	for k := 0; k < nm; k++ {
		if got := len(block(g.ranks[k])); len(recv(k)) != got {
			return c.hierEnd(fmt.Errorf("scatterv: rank %d receives %d bytes, the root's counts say %d: %w", g.ranks[k], len(recv(k)), got, ErrInvalid))
		}
	}
	leaders := h.procLeaders()
	need := 0
	ranks := make([][]int, h.procs)
	for j := range h.procs {
		if j != me {
			ranks[j] = h.procRanks(j)
			need += vmsgLen(func(k int) int { return len(block(ranks[j][k])) }, len(ranks[j]))
		}
	}
	scratch, at := c.buf(1, need), 0
	for j := range h.procs {
		if j == me {
			continue
		}
		blocks := func(k int) []byte { return block(ranks[j][k]) }
		n := vmsgLen(func(k int) int { return len(blocks(k)) }, len(ranks[j]))
		m := scratch[at : at+n : at+n]
		at += n
		vpack(m, blocks, len(ranks[j]))
		if err = c.send(m, leaders[j]); err != nil {
			return c.hierEnd(err)
		}
	}
	if err = c.wait(ctx); err != nil {
		return c.hierEnd(err)
	}
	err = c.hierRelease(func() {
		for k := 0; k < nm; k++ {
			memcopy.Copy(recv(k), block(g.ranks[k]))
		}
	})
	if err == nil {
		err = v.finish()
	}
	return c.hierEnd(err)
}

// hierAllgatherv: each process leader sends its ranks' blocks to every
// other process leader in one message, checks what it receives against
// its members' layouts of the whole, and copies every block into every
// member's buffer (over one process: straight from the members'
// buffers).
func hierAllgatherv(ctx context.Context, c *Coll, v *vcall) error {
	lead, err := vArrive(ctx, c, v, v.mine, nil)
	if !lead {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	me := h.procOf[c.rank]
	nm := len(g.slots)
	send := func(k int) []byte { return g.slots[k].send }
	// every member's layout of the whole must agree with every block
	for i := 0; i < nm; i++ {
		for k := 0; k < nm; k++ {
			if want := len(g.slots[i].vblock(g.ranks[k])); len(send(k)) != want {
				return c.hierEnd(fmt.Errorf("allgatherv: rank %d sends %d bytes, rank %d's counts say %d: %w", g.ranks[k], len(send(k)), g.ranks[i], want, ErrInvalid))
			}
		}
	}
	var msgs [][]byte
	var ranks [][]int
	if h.procs > 1 {
		leaders := h.procLeaders()
		msgs, ranks = make([][]byte, h.procs), make([][]int, h.procs)
		own := func(k int) int { return len(send(k)) }
		sizes := func(j int) func(k int) int { return func(k int) int { return len(v.block(ranks[j][k])) } }
		need := vmsgLen(own, nm)
		for j := range h.procs {
			if j != me {
				ranks[j] = h.procRanks(j)
				need += vmsgLen(sizes(j), len(ranks[j]))
			}
		}
		scratch := c.buf(1, need)
		at := vmsgLen(own, nm)
		out := scratch[:at:at]
		vpack(out, send, nm)
		for j := range h.procs {
			if j == me {
				continue
			}
			n := vmsgLen(sizes(j), len(ranks[j]))
			msgs[j] = scratch[at : at+n : at+n]
			at += n
			if err = c.recv(msgs[j], leaders[j]); err != nil {
				return c.hierEnd(err)
			}
		}
		for j := range h.procs {
			if j != me {
				if err = c.send(out, leaders[j]); err != nil {
					return c.hierEnd(err)
				}
			}
		}
		if err = c.wait(ctx); err != nil {
			return c.hierEnd(err)
		}
		for j := range h.procs {
			if j == me {
				continue
			}
			for i := 0; i < nm; i++ {
				blk := g.slots[i].vblock
				whose := fmt.Sprintf("rank %d's counts", g.ranks[i])
				if err := vcheck(msgs[j], ranks[j], func(k int) int { return len(blk(ranks[j][k])) }, "allgatherv", whose); err != nil {
					return c.hierEnd(err)
				}
			}
		}
	}
	err = c.hierRelease(func() {
		for i := 0; i < nm; i++ {
			blk := g.slots[i].vblock
			for k := 0; k < nm; k++ {
				memcopy.Copy(blk(g.ranks[k]), send(k)) // its own block too: a copy onto itself in place
			}
			for j := range msgs {
				if j != me {
					vunpack(msgs[j], len(ranks[j]), func(k int) int { return len(blk(ranks[j][k])) }, func(k int, b []byte) { memcopy.Copy(blk(ranks[j][k]), b) })
				}
			}
		}
	})
	if err == nil {
		err = v.finish()
	}
	return c.hierEnd(err)
}
