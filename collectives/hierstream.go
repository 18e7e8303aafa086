package collectives

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/cma"
	"github.com/weft-hpc/weft/internal/memcopy"
)

// Node streams: the large-message form of the node level (hiernode.go)
// on a node that holds the whole communicator (no leaders' network). A
// stream is one node step that moves its data in chunks through
// sub-slots of the processes' data slots, so that producers copy chunk
// k+1 in while consumers copy (or fold) chunk k out, and every process
// reads straight from the slot of the process that wrote the data, with
// no stop at the node's leader:
//
//   - Reduce (two processes): the other process writes its
//     contribution, the root's process folds each chunk from the slot
//     into the result.
//   - Allgather and Alltoall: every process writes its blocks (for
//     Alltoall, one region of each sub-slot per destination process),
//     every process reads the others'.
//
// Each process's line of the segment holds two counters of chunks
// (positions that keep growing from call to call, the same on every
// process of the node): produced (its slot holds the chunk) and
// consumed (it has read the chunk from every slot). A producer writes
// chunk p into sub-slot p mod streamDepth once every other process has
// consumed chunk p − streamDepth. A process that consumes nothing in a stream
// sets its consumed counter to the stream's end as it starts. The
// node's leader publishes the step as done once every process has
// consumed every chunk, which is what the next step's writers wait for.

const (
	streamDepth = 8                      // sub-slots per data slot
	streamSub   = nodeSlot / streamDepth // bytes of a sub-slot
)

// The stream counters: words 5 and 7 of process i's line.
func (ng *nodeGroup) produced(i int) *atomic.Uint64 { return ng.word(1+i, 5) }
func (ng *nodeGroup) consumed(i int) *atomic.Uint64 { return ng.word(1+i, 7) }

// sub returns process i's sub-slot for chunk position p.
func (ng *nodeGroup) sub(i int, p uint64) []byte {
	s := ng.slot(i)
	o := int(p%streamDepth) * streamSub
	return s[o : o+streamSub : o+streamSub]
}

// nodeStream describes one stream: n chunks; which node processes
// produce and consume; fill writes this process's chunk k into its
// sub-slot; take reads chunk k from the producers' sub-slots (sub(i)).
type nodeStream struct {
	n          int
	prod, cons func(i int) bool
	fill       func(k int, sub []byte)
	take       func(k int, sub func(i int) []byte)
}

// streams reports whether the node level moves nbytes (per rank) as a
// stream: a node level over the whole communicator (one node, several
// processes) and at least collnodestream bytes. Every handle of the
// communicator gives the same answer.
func (c *Coll) streams(nbytes int) bool {
	h := c.hier
	return h != nil && h.chunk > 0 && h.tops == 1 && h.procs > 1 && nbytes > 0 && nbytes >= c.cfg.stream
}

// nodeStream runs st as this process leader's next node step.
func (c *Coll) nodeStream(ctx context.Context, st *nodeStream) error {
	ng := c.hier.ng
	ng.step++
	s := ng.step
	mark := s<<32 | c.sig<<2&sigBitsMask | slotArrived
	base := ng.pos
	end := base + uint64(st.n)
	ng.pos = end
	me := ng.ni
	if err := c.streamBegin(ctx, ng, s, mark); err != nil {
		return err
	}
	if !st.cons(me) {
		publish(ng.consumed(me), end)
	}
	if ng.subOf == nil {
		ng.subOf = func(i int) []byte { return ng.sub(i, ng.subPos) }
	}
	for k := 0; k < st.n; k++ {
		p := base + uint64(k)
		if st.prod(me) {
			if p >= streamDepth {
				if err := c.streamWait(ctx, ng, ng.consumed, p+1-streamDepth, nil); err != nil {
					return err
				}
			}
			st.fill(k, ng.sub(me, p))
			publish(ng.produced(me), p+1)
		}
		if st.cons(me) {
			if err := c.streamWait(ctx, ng, ng.produced, p+1, st.prod); err != nil {
				return err
			}
			ng.subPos = p
			st.take(k, ng.subOf)
			publish(ng.consumed(me), p+1)
		}
	}
	if me != 0 {
		return nil
	}
	if err := c.streamWait(ctx, ng, ng.consumed, end, nil); err != nil {
		return err
	}
	publish(ng.state(), s)
	return nil
}

// streamWait waits until counter(i) ≥ v for every other process i of
// the node (those of which only is true, unless only is nil).
func (c *Coll) streamWait(ctx context.Context, ng *nodeGroup, counter func(int) *atomic.Uint64, v uint64, only func(int) bool) error {
	for i := 0; i < ng.m; i++ {
		if i == ng.ni || only != nil && !only(i) {
			continue
		}
		w := counter(i)
		if w.Load() >= v {
			continue
		}
		if err := c.nodeSpin(ctx, ng, i, func() (bool, error) {
			if w.Load() >= v {
				return true, nil
			}
			return false, ng.failed()
		}); err != nil {
			return err
		}
	}
	return nil
}

// streamBegin begins stream step s (mark) on this process leader: on
// the node's other processes, once the leader has finished step s-1,
// the output of a step before that this process did not read is checked
// (nodeStepFrom: a stream leaves no output mark, so the next step could
// not check it) and the arrival published; on the node's leader, every
// process has arrived, and the next step's leader takes an arrival word
// still at this mark as begun.
func (c *Coll) streamBegin(ctx context.Context, ng *nodeGroup, s, mark uint64) error {
	if ng.ni == 0 {
		ng.flushSym()
		publish(ng.arrival(0), mark) // (for symmetric steps, hierexch.go)
		if streamArrived != nil {
			streamArrived()
		}
		if err := c.nodeArrivals(ctx, ng, s, mark); err != nil {
			return err
		}
		ng.prev = mark
		return nil
	}
	if err := c.nodeWait(ctx, ng, s-1); err != nil {
		return err
	}
	if ng.prev != 0 {
		err := ng.checkOut(c, s-1, ng.prev)
		ng.prev = 0
		if err != nil {
			return err
		}
	}
	publish(ng.arrival(ng.ni), mark)
	return nil
}

// streamArrived, when set (by tests), runs on the node's leader between
// its arrival at a stream and its wait for the others'.
var streamArrived func()

// nodeArrivals (the node's leader) waits until every other process of
// the node has arrived at step s with mark.
func (c *Coll) nodeArrivals(ctx context.Context, ng *nodeGroup, s, mark uint64) error {
	for i := 1; i < ng.m; i++ {
		if err := c.nodeArrival(ctx, ng, i, s, mark); err != nil {
			return err
		}
	}
	return ng.failed()
}

// nodeArrival waits until process i of the node has arrived at step s
// with mark; at step s with another mark it called another collective.
func (c *Coll) nodeArrival(ctx context.Context, ng *nodeGroup, i int, s, mark uint64) error {
	a := ng.arrival(i)
	return c.nodeSpin(ctx, ng, i, func() (bool, error) {
		v := a.Load()
		switch {
		case v == mark:
			return true, nil
		case v>>32 == s&(1<<32-1):
			return false, fmt.Errorf("rank %d of this node called another collective, or with other arguments, where this rank is at %s #%d: %w",
				ng.ranks[i], c.call, c.seq, ErrInvalid)
		}
		return false, ng.failed()
	})
}

// chunkOf returns chunk k of n units cut w at a time: [a, b).
func chunkOf(k, w, n int) (a, b int) {
	a = min(k*w, n)
	return a, min(a+w, n)
}

// chunksFor is how many chunks of w units n units take.
func chunksFor(n, w int) int { return (n + w - 1) / w }

// everyProc: every process of the node.
func everyProc(int) bool { return true }

// foldChunk sets dst to the members' contributions [a, b) (src(i) for
// the process's ranks) combined in rank order.
func foldChunk[T any](dst []T, g *procGroup, src func(i int) []T, a, b int, op *Op[T]) {
	memcopy.CopyOf(dst, src(0)[a:b])
	for i := 1; i < len(g.slots); i++ {
		op.left(dst, src(i)[a:b])
	}
}

// streamReduce (process leader, commutative op): the contributions of
// the node's processes (each process's ranks' send buffers, src) combined
// into out on process rp's leader.
func streamReduce[T any](ctx context.Context, c *Coll, n int, src func(i int) []T, out []T, op *Op[T], rp int) error {
	g := c.hier.g
	w := streamSub / sizeOf[T]()
	return c.nodeStream(ctx, &nodeStream{
		n:    chunksFor(n, w),
		prod: func(i int) bool { return i != rp },
		cons: func(i int) bool { return i == rp },
		fill: func(k int, sub []byte) {
			a, b := chunkOf(k, w, n)
			if len(g.slots) == 1 {
				c.stream(sub, bytesOf(src(0)[a:b]))
				return
			}
			foldChunk(elems[T](sub)[:b-a], g, src, a, b, op)
		},
		take: func(k int, sub func(int) []byte) {
			a, b := chunkOf(k, w, n)
			o := out[a:b]
			foldChunk(o, g, src, a, b, op)
			for i := 0; i < c.hier.ng.m; i++ {
				if i != rp {
					op.left(o, elems[T](sub(i))[:b-a])
				}
			}
		},
	})
}

// streamAllreduce (process leader, commutative op): src is this
// process's contribution (its ranks' already folded, or the leader's
// send), acc receives the result (it may be src). Every process streams
// its contribution in and folds every process's chunk into its own acc,
// in process order, so that every process computes the same result bit
// for bit; its own chunk it folds from src, which the stream has just
// read. Each process reads what the others wrote, as an allgather of the
// contributions would; with two processes that is all a reduce-scatter
// and an allgather would read, in one stream.
func streamAllreduce[T any](ctx context.Context, c *Coll, src, acc []T, op *Op[T]) error {
	ng, n := c.hier.ng, len(acc)
	w := streamSub / sizeOf[T]()
	apart := n > 0 && &src[0] != &acc[0] // else acc's chunk is overwritten before its turn: fold it from the slot
	return c.nodeStream(ctx, &nodeStream{
		n:    chunksFor(n, w),
		prod: everyProc,
		cons: everyProc,
		fill: func(k int, sub []byte) {
			a, b := chunkOf(k, w, n)
			c.stream(sub, bytesOf(src[a:b]))
		},
		take: func(k int, sub func(int) []byte) {
			a, b := chunkOf(k, w, n)
			o := acc[a:b]
			part := func(i int) []T {
				if i == ng.ni && apart {
					return src[a:b]
				}
				return elems[T](sub(i))[:b-a]
			}
			if ng.ni != 0 || apart {
				memcopy.CopyOf(o, part(0))
			}
			for i := 1; i < ng.m; i++ {
				op.left(o, part(i))
			}
		},
	})
}

// byPos returns the comm rank at each place of hierGather's layout.
func (h *hier) byPos() []int {
	r := make([]int, len(h.procOf))
	for q := range r {
		r[h.pos(q)] = q
	}
	return r
}

// streamAllgather (process leader): every process's ranks' blocks (nb
// bytes, the published send buffers) into this process leader's recv
// (comm rank order).
func (c *Coll) streamAllgather(ctx context.Context, recv []byte, nb int) error {
	h, g := c.hier, c.hier.g
	me, rk := h.procOf[c.rank], h.byPos()
	most := 0
	for j := 0; j < h.procs; j++ {
		most = max(most, (h.first[j+1]-h.first[j])*nb)
	}
	// span calls f for the pieces of bytes [a, b) of process j's blocks
	// laid end to end: its local rank, the offset in the block and the
	// piece's offset from a.
	span := func(j, a, b int, f func(li, off, at, n int)) {
		for o := a; o < b; {
			li, off := o/nb, o%nb
			n := min(nb-off, b-o)
			f(li, off, o-a, n)
			o += n
		}
	}
	lenOf := func(j int) int { return (h.first[j+1] - h.first[j]) * nb }
	return c.nodeStream(ctx, &nodeStream{
		n:    chunksFor(most, streamSub),
		prod: everyProc,
		cons: everyProc,
		fill: func(k int, sub []byte) {
			a, b := chunkOf(k, streamSub, lenOf(me))
			span(me, a, b, func(li, off, at, n int) {
				c.stream(sub[at:at+n], g.slots[li].send[off:off+n])
			})
		},
		take: func(k int, sub func(int) []byte) {
			for j := 0; j < h.procs; j++ {
				if j == me {
					continue
				}
				a, b := chunkOf(k, streamSub, lenOf(j))
				s := sub(j)
				span(j, a, b, func(li, off, at, n int) {
					r := rk[h.first[j]+li]
					memcopy.Copy(recv[r*nb+off:r*nb+off+n], s[at:at+n])
				})
			}
		},
	})
}

// streamAlltoall (process leader, members' buffers writable): block q
// of each rank r's send to block r of rank q's recv for every pair of
// ranks in different processes. Sub-slots hold one region per
// destination process; the pair of processes (i, j) moves i's ranks'
// blocks for j's ranks, i's ranks outer, laid end to end.
func (c *Coll) streamAlltoall(ctx context.Context, nb int) error {
	h, g := c.hier, c.hier.g
	me, rk, m := h.procOf[c.rank], h.byPos(), h.procs
	cnt := func(j int) int { return h.first[j+1] - h.first[j] }
	reg := streamSub / m
	most := 0
	for i := 0; i < m; i++ {
		most = max(most, cnt(i))
	}
	// span calls f for the pieces of bytes [a, b) of pair (i, j): the
	// local index of the sending rank in i, the receiving rank's in j,
	// the offset in the block and the piece's offset from a.
	span := func(i, j, a, b int, f func(li, lj, off, at, n int)) {
		nj := cnt(j)
		for o := a; o < b; {
			bi, off := o/nb, o%nb
			n := min(nb-off, b-o)
			f(bi/nj, bi%nj, off, o-a, n)
			o += n
		}
	}
	pair := func(i, j int) int { return cnt(i) * cnt(j) * nb }
	return c.nodeStream(ctx, &nodeStream{
		n:    chunksFor(most*most*nb, reg),
		prod: everyProc,
		cons: everyProc,
		fill: func(k int, sub []byte) {
			for j := 0; j < m; j++ {
				if j == me {
					continue
				}
				a, b := chunkOf(k, reg, pair(me, j))
				r := sub[j*reg : (j+1)*reg]
				span(me, j, a, b, func(li, lj, off, at, n int) {
					q := rk[h.first[j]+lj]
					c.stream(r[at:at+n], g.slots[li].send[q*nb+off:q*nb+off+n])
				})
			}
		},
		take: func(k int, sub func(int) []byte) {
			for i := 0; i < m; i++ {
				if i == me {
					continue
				}
				a, b := chunkOf(k, reg, pair(i, me))
				r := sub(i)[me*reg : (me+1)*reg]
				span(i, me, a, b, func(li, lj, off, at, n int) {
					src := rk[h.first[i]+li]
					memcopy.Copy(g.slots[lj].recv[src*nb+off:src*nb+off+n], r[at:at+n])
				})
			}
		},
	})
}

// cmaUsable reports whether this process may read the memory of the
// node's other processes with cross-memory attach (internal/cma): the
// kernel has the calls and Yama, where loaded, lets any process of the
// same uid read another (endpoint's node transport asks the same).
var cmaUsable = sync.OnceValue(func() bool {
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) != "0" {
		return false
	}
	return cma.Available(os.Getpid()) == nil
})

// nodeCMA is what setupNode asks (a variable for the tests, which take
// the segment's path with it off).
var nodeCMA = cmaUsable

// The single-copy form of a stream (Allgather, Alltoall, where
// every process of the node may read the others' memory): each process
// leader publishes the address of its buffer in word 4 of its line and
// arrives; every reader copies what it needs straight from the writers'
// buffers (process_vm_readv), then counts the step as consumed; no
// process leaves before every process has consumed, since the buffers
// must stay as they are until then.

// addr is process i's published buffer address.
func (ng *nodeGroup) addr(i int) *atomic.Uint64 { return ng.word(1+i, 4) }

// nodeRead runs one single-copy node step: this process leader
// publishes buf; read copies from every other process, given its
// published address (read's get copies a peer's bytes at an address
// into a local slice).
func (c *Coll) nodeRead(ctx context.Context, buf []byte, read func(i int, base uintptr, get func(dst []byte, at uintptr) error) error) error {
	ng := c.hier.ng
	ng.step++
	ng.reads++
	s := ng.step
	mark := s<<32 | c.sig<<2&sigBitsMask | slotArrived
	ng.pos++
	end := ng.pos
	me := ng.ni
	ng.addr(me).Store(uint64(cma.Addr(buf)))
	if me == 0 {
		publish(ng.arrival(0), mark) // (the leader's own arrival: for the readers)
	}
	if err := c.streamBegin(ctx, ng, s, mark); err != nil {
		return err
	}
	for i := 0; i < ng.m; i++ {
		if i == me {
			continue
		}
		if err := c.nodeArrival(ctx, ng, i, s, mark); err != nil {
			return err
		}
		if ng.readFrom == nil {
			ng.readFrom = func(dst []byte, at uintptr) error {
				j := ng.readProc
				if _, err := cma.Read(ng.ids[j].pid, dst, at); err != nil {
					return fmt.Errorf("copy from the process of rank %d: %w", ng.ranks[j], err)
				}
				return nil
			}
		}
		ng.readProc = i
		if err := read(i, uintptr(ng.addr(i).Load()), ng.readFrom); err != nil {
			return err
		}
	}
	publish(ng.consumed(me), end)
	if err := c.streamWait(ctx, ng, ng.consumed, end, nil); err != nil {
		return err
	}
	if me == 0 {
		publish(ng.state(), s)
	}
	return nil
}

// singleCopy reports whether the node's processes copy straight from
// each other's buffers (every one may, and, with one, each process holds
// one rank of the communicator).
func (c *Coll) singleCopy(oneRank bool) bool {
	h := c.hier
	if !h.ng.cma {
		return false
	}
	return !oneRank || h.first[h.procs] == h.procs
}

// cmaAllgather (process leader): every process's ranks' blocks (in its
// leader's recv, at their ranks' places) into this leader's recv.
func (c *Coll) cmaAllgather(ctx context.Context, recv []byte, nb int) error {
	h := c.hier
	return c.nodeRead(ctx, recv, func(i int, base uintptr, get func([]byte, uintptr) error) error {
		for q := 0; q < len(h.procOf); q++ {
			if h.procOf[q] == i {
				if err := get(recv[q*nb:(q+1)*nb], base+uintptr(q*nb)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// cmaAllgatherFrom (one rank per process, not in place): every other
// process's block read from its send buffer into recv. Its copy in
// recv was written by its own core just before, and a read of those
// lines would wait for that core to give them up; the send buffer's are
// clean.
func (c *Coll) cmaAllgatherFrom(ctx context.Context, send, recv []byte, nb int) error {
	rk := c.hier.byPos() // process i's rank: rk[i]
	return c.nodeRead(ctx, send, func(i int, base uintptr, get func([]byte, uintptr) error) error {
		return get(recv[rk[i]*nb:(rk[i]+1)*nb], base)
	})
}

// cmaAlltoall (one rank per process): block me of every other rank's
// send into its block of recv.
func (c *Coll) cmaAlltoall(ctx context.Context, send, recv []byte, nb int) error {
	me, rk := c.rank, c.hier.byPos() // process i's rank: rk[i]
	return c.nodeRead(ctx, send, func(i int, base uintptr, get func([]byte, uintptr) error) error {
		return get(recv[rk[i]*nb:(rk[i]+1)*nb], base+uintptr(me*nb))
	})
}

// pairReadMin is the size per rank from which the two processes of a
// node, one rank each, read each other's buffers (nodeRead) in an
// Allgather, an Alltoall and a Reduce rooted away from the node's leader
// (down to collnodestream where that is lower; pairReadRootMin bounds
// the other rooted calls). On an Intel Xeon host, whose cores hand each
// other freshly written lines slowly, a copy through the node segment of
// 16 KiB, in and then out, took about twice Open MPI's single copy from
// a buffer OSU's loop leaves untouched: Allgather 2.41 µs against 4.10,
// Alltoall 2.64 against 4.74; from a buffer just written the single copy
// lost 1.1–1.5× instead; at 4 KiB the segment's copies were the faster
// (docs/perf/collectives.md).
const pairReadMin = 8 << 10

// pairReadMax bounds the Bcasts and Reduces that pairReads applies to,
// one node step's chunk: above it a Bcast goes through the node's
// leader's steps and a Reduce as a stream, whose copies of 512 KiB stay
// in the caches (1 MiB Reduce 97 µs against 160–190 read whole).
const pairReadMax = 512 << 10

// pairReads reports whether a call moving nbytes per rank goes between
// the two processes of one node, one rank each, as single copies from
// each other's buffers. Every rank gives the same answer: the shape is
// the communicator's, the kernel's permission was agreed at set-up
// (nodeGroup.cma) and the size is the call's.
func (c *Coll) pairReads(nbytes int) bool {
	h := c.hier
	return h != nil && h.chunk > 0 && h.tops == 1 && h.procs == 2 && h.ng != nil && nbytes > 0 &&
		nbytes >= min(pairReadMin, c.cfg.stream) && c.singleCopy(true)
}

// pairReadRootMin is the size from which a Bcast, and a Reduce rooted at
// the node's leader, take pairReads' single copies (down to
// collnodestream where that is lower). Below it the single copy won only
// where the root's buffer had not been written since the last call, as
// in OSU's loop (16 KiB Bcast 1.5 µs against 2.5 through the node
// segment), and lost where the root had just written it, as a program
// has, since the other core then reads lines still in the root's cache
// (3.6–3.8 µs against 2.3–2.4, where the segment's copy in streams them
// to memory); from 32 KiB the two ways tie either way. A Reduce rooted
// away from the leader saves a step by reading, and reads from pairReadMin
// (16 KiB, a freshly written send: 4.3–4.7 µs against 6.5–6.9;
// docs/perf/collectives.md).
const pairReadRootMin = 32 << 10

// pairReadsRooted is pairReads for a Bcast or a Reduce, up to
// pairReadMax and, unless the call's other way takes an extra step
// (hop: a Reduce rooted away from the node's leader), from
// pairReadRootMin.
func (c *Coll) pairReadsRooted(nbytes int, hop bool) bool {
	return nbytes <= pairReadMax && (hop || nbytes >= min(pairReadRootMin, c.cfg.stream)) && c.pairReads(nbytes)
}

// cmaBcast (process leader): node process rk's b read into the other
// process's b, straight from the root's buffer.
func (c *Coll) cmaBcast(ctx context.Context, b []byte, rk int) error {
	return c.nodeRead(ctx, b, func(i int, base uintptr, get func([]byte, uintptr) error) error {
		if i != rk {
			return nil
		}
		return get(b, base)
	})
}

// cmaReduce (one rank per process, two processes, commutative op): the
// other process's send read straight from its buffer into out on node
// process rp, which then folds its own send in (or, in place, into a
// scratch buffer folded into out).
func cmaReduce[T any](ctx context.Context, c *Coll, src, out []T, op *Op[T], rp int) error {
	if c.hier.ng.ni != rp {
		return c.nodeRead(ctx, bytesOf(src), func(int, uintptr, func([]byte, uintptr) error) error { return nil })
	}
	n := len(out)
	return c.nodeRead(ctx, bytesOf(out), func(_ int, base uintptr, get func([]byte, uintptr) error) error {
		if n > 0 && &src[0] == &out[0] {
			tmp := elems[T](c.buf(1, n*sizeOf[T]()))
			if err := get(bytesOf(tmp), base); err != nil {
				return err
			}
			op.left(out, tmp)
			return nil
		}
		if err := get(bytesOf(out), base); err != nil {
			return err
		}
		op.left(out, src)
		return nil
	})
}
