package collectives

import (
	"time"

	"github.com/weft-hpc/weft/internal/choose"
	"github.com/weft-hpc/weft/internal/memcopy"
)

// The node level copies data into memory that other processes (or the
// other handles of this process) read next: slots, exchange areas,
// streams, stage buffers. Non-temporal stores (memcopy.Stream) do not
// wait for the lines the readers' cores hold, which made them 3–4×
// faster where the two cores of the AMD hosts of docs/perf/collectives.md
// shared no cache, and as fast where they did; on an Intel Xeon host
// they ran at half the speed of plain stores and the plain copy was the
// faster at every size (a 2-process Bcast of 1 MiB 105–113 µs streamed,
// 66–68 plain). Which is faster is a property of the machine, and on a
// virtual machine of where its host runs the vCPUs, so each handle times
// its calls both ways, per collective and size class (internal/choose),
// and keeps the faster; WEFT_TUNE's collstores fixes the way.

// storeMode is WEFT_TUNE's collstores.
type storeMode uint8

const (
	storeAuto storeMode = iota
	storeStreamed
	storePlainOnly
)

// The two ways of a call's copies (choose.Pair's way numbers).
const (
	storeStream = 0 // memcopy.Shared and memcopy.Stream, as built
	storePlain  = 1 // memcopy.Copy
)

// storeTimed is the call in progress whose copies' way is being timed.
type storeTimed struct {
	pair *choose.Pair
	n    int
	t0   time.Time
}

// storeMin is the smallest call (count × element size) whose copies'
// way is chosen by timing: below it the two clock readings and the
// lookup (about 0.1 µs) are a tenth of a call between two processes
// (an 8 KiB Bcast 1.41–1.46 µs streamed, 1.55–1.59 timed), and copies of
// 8–16 KiB ran about as fast either way on the hosts measured.
const storeMin = 32 << 10

// storeBegin picks the way of the copies of the call of signature s that
// starts (ready): timed when the handle has a node level, the call moves
// at least storeMin bytes and is blocking. Other calls stream from
// memcopy.SharedMin bytes as built (or as collstores says).
func (c *Coll) storeBegin(s callSig) {
	c.storeWay, c.storeTime = storeStream, storeTimed{}
	switch c.cfg.stores {
	case storePlainOnly:
		c.storeWay = storePlain
		return
	case storeStreamed:
		return
	}
	n := s.count * s.esize
	if c.hier == nil || c.own != nil || n < storeMin {
		return
	}
	if c.stores == nil {
		c.stores = map[callID]*choose.Pair{}
	}
	p := c.stores[s.call]
	if p == nil {
		p = new(choose.Pair)
		c.stores[s.call] = p
	}
	now := time.Now()
	c.storeWay = p.Pick(n, now)
	c.storeTime = storeTimed{pair: p, n: n, t0: now}
}

// storeEnd records the time of the call that ends (done) when it was
// timed; failed calls are not (storeDrop).
func (c *Coll) storeEnd() {
	if t := c.storeTime; t.pair != nil {
		t.pair.Learn(c.storeWay, t.n, time.Since(t.t0))
		c.storeTime = storeTimed{}
	}
}

// storeDrop forgets the timing of a call that failed.
func (c *Coll) storeDrop() { c.storeTime = storeTimed{} }

// shared copies src into dst, memory another process or handle reads
// next, the call's way: memcopy.Shared (streamed from SharedMin bytes),
// or the cached copy.
func (c *Coll) shared(dst, src []byte) int {
	if c.storeWay == storePlain {
		return memcopy.Copy(dst, src)
	}
	return memcopy.Shared(dst, src)
}

// stream is shared for the node level's streams, which stream from
// memcopy.MinStream bytes.
func (c *Coll) stream(dst, src []byte) int {
	if c.storeWay == storePlain {
		return memcopy.Copy(dst, src)
	}
	return memcopy.Stream(dst, src)
}
