package endpoint

import (
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/gpu"
)

// SetPipePieceHook has f run after each piece a pipelined node-transport
// typed send has packed (off bytes of n); nil removes it. Set it before
// the first send.
func SetPipePieceHook(f func(off, n int)) { pipePieceHook = f }

// SentEagerly reports whether send request r went eagerly (not by
// rendezvous).
func SentEagerly(r *Request) bool { return r.kind == kSendEager }

// EagerLimit is the eager limit of c's endpoint.
func EagerLimit(c *Comm) int { return c.v.eagerLimit }

// DeviceEntries counts what c's endpoint keeps for device d: its send
// ring, its mapping of the bounce buffers, its close hook.
func DeviceEntries(c *Comm, d *gpu.Device) int {
	c.v.lock()
	defer c.v.unlock()
	n := 0
	if _, ok := c.v.devRings[d]; ok {
		n++
	}
	if _, ok := c.v.devMaps[d]; ok {
		n++
	}
	if _, ok := c.v.devHooks[d]; ok {
		n++
	}
	return n
}

// TinyBlocks reports whether a receive of count elements of t averages
// blocks small enough that a medium message is copied out of its slot
// before the unpack.
func TinyBlocks(count int, t *ddt.Type) bool {
	n, _ := t.PackSize(count)
	u := typedRecv{count: count, t: t, n: int(n)}
	return u.tinyBlocks()
}
