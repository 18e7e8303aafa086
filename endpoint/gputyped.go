package endpoint

// Typed messages whose data live in GPU memory (package gpu): the message
// is the same packed stream as a host typed message's, so either side may
// be a host layout. The sender's pack kernel writes the stream, segment by
// segment, into a ring of pinned host buffers that are mapped into the
// device and registered with libfabric; each segment is sent from there
// as soon as its kernel has finished, and the kernels of the next segments
// are already enqueued (gpu.Device.PackAsync) while it is on the wire. The
// receiver unpacks each segment as it arrives with the unpack kernel,
// straight into the GPU buffer. Small messages, node peers and the packed
// fallback pack through the device's staging buffer
// (gpu.Device.PackBytes) into whatever the transport sends from.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/devhook"
)

// devView validates typed data in device memory and returns its packed
// size.
func devView(d gpu.Typed) (int, error) {
	n, err := d.Check()
	if err != nil {
		return 0, fmt.Errorf("endpoint: %w", err)
	}
	return int(n), nil
}

// devPack packs the stream's bytes from off of GPU data into piece, host
// memory, through the device's staging buffer.
func devPack(d *gpu.Typed, off int, piece []byte) error {
	m, err := d.Buf.Device().PackBytes(context.Background(), piece, *d, int64(off))
	if err == nil && m != int64(len(piece)) {
		err = fmt.Errorf("packed %d of %d bytes: %w", m, len(piece), errs.ErrOutOfRange)
	}
	return err
}

// devUnpack unpacks piece, the stream's bytes from off, into GPU data.
func devUnpack(d *gpu.Typed, off int, piece []byte) error {
	m, err := d.Buf.Device().UnpackBytes(context.Background(), *d, piece, int64(off))
	if err == nil && m != int64(len(piece)) {
		err = fmt.Errorf("unpacked %d of %d bytes: %w", m, len(piece), errs.ErrOutOfRange)
	}
	return err
}

// IsendDevice starts sending src, Count elements of a committed datatype
// in GPU memory, to rank dest with tag. The message is the type's packed
// stream, so the receiver may take it into GPU memory (IrecvDevice) or
// into any host layout of the same data (IrecvTyped). The device's pack
// kernel writes the stream into pinned host buffers mapped into the
// device, from which the transport sends it; large messages to libfabric
// peers are pipelined, the kernels of later segments running while
// earlier ones are on the wire (docs/gpu.md). src's memory must not be
// modified until the request completes, and the device must stay open.
// Errors: those of IsendTyped, and gpu.ErrDeclined (wrapping
// errs.ErrNotSupported) for a type without a GPU kernel.
func (c *Comm) IsendDevice(src gpu.Typed, dest, tag int) (*Request, error) {
	if null, err := c.sendTo(dest, tag); err != nil {
		return nil, err
	} else if null {
		return completedRequest, nil
	}
	n, err := devView(src)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return c.isend(nil, dest, tag, c.ctx)
	}
	v := c.v
	v.lock()
	live := v.isClosed() || v.watchDevice(src.Buf.Device()) // a closed endpoint reports itself
	v.unlock()
	if !live {
		return nil, fmt.Errorf("endpoint: send from %s: %w", src.Buf.Device(), gpu.ErrClosed)
	}
	return c.isendLayout(&typedRecv{dev: &src, tx: c.v, count: src.Count, t: src.Type, n: n}, dest, tag)
}

// IrecvDevice starts receiving into dst, at most Count elements of a
// committed datatype in GPU memory, a message from src (AnySource,
// ProcNull) with tag (AnyTag); it behaves as IrecvTyped does (shorter
// messages fill a prefix, longer ones complete with ErrTruncated). Each
// piece of the message is unpacked by the device's unpack kernel as it
// arrives. The device must stay open until the request completes.
func (c *Comm) IrecvDevice(dst gpu.Typed, src, tag int) (*Request, error) {
	if err := c.usable("receive"); err != nil {
		return nil, err
	}
	if src == ProcNull {
		return procNullRecv(), nil
	}
	n, err := devView(dst)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return c.irecv(nil, src, tag, c.ctx)
	}
	return c.irecvReq(nil, src, tag, c.ctx, false, &typedRecv{dev: &dst, rx: c.v, count: dst.Count, t: dst.Type, n: n})
}

// SendDevice sends src to dest (see IsendDevice) and returns once its
// memory may be reused or ctx ends.
func (c *Comm) SendDevice(ctx context.Context, src gpu.Typed, dest, tag int) error {
	r, err := c.IsendDevice(src, dest, tag)
	return sendWait(ctx, r, err)
}

// RecvDevice receives into dst (see IrecvDevice). If ctx ends first the
// receive is cancelled and the error wraps ctx.Err().
func (c *Comm) RecvDevice(ctx context.Context, dst gpu.Typed, src, tag int) (Status, error) {
	r, err := c.IrecvDevice(dst, src, tag)
	return recvWait(ctx, r, err)
}

// devRing is a ring of chunks in pinned host memory of one device
// (gpu.Device.AllocHost: mapped into the device, so its kernels write it),
// registered with the endpoint's domain, so the provider sends from it.
// One pack kernel fills a chunk, which then goes out in segments of at
// most size bytes; it is free again once all of them completed. An
// endpoint keeps one ring per device it has sent from, until it closes.
type devRing struct {
	buf   *gpu.Buffer
	mr    *fabric.MR
	size  int // payload bytes per segment on the wire
	hl    int // bytes reserved in front of each chunk's payload (v.hdrLen)
	chunk int // payload bytes per chunk: size when hl > 0 (the header goes in front of each segment)
	free  []int
	busy  []int // per chunk: its segments not yet completed
	// hmem: the ring is device memory registered with FI_HMEM
	// (RegisterDevice) at device address addr; segments are sent from
	// there (no header in front: hl is 0).
	hmem bool
	addr uint64
}

// newDevRing returns the ring layout for n bytes of memory: chunks of
// gpuchunk bytes sent in segments of size bytes, or, with a header in
// front of each segment (hl > 0), one segment per chunk.
func newDevRing(size, hl, n int) *devRing {
	g := &devRing{size: size, hl: hl, chunk: size}
	if hl == 0 {
		g.chunk = devChunk(size)
	}
	g.busy = make([]int, max(1, n/(hl+g.chunk)))
	return g
}

// devRingBytes is the memory of a device ring: devRingChunks chunks of
// gpuchunk bytes, or, with a header in front of each segment, depth
// segments.
func devRingBytes(size, hl, depth int) int {
	if hl > 0 {
		return (hl + size) * depth
	}
	return devRingChunks * devChunk(size)
}

// devChunk is the payload of a ring's chunk whose segments carry size
// bytes: gpuchunk, in whole segments.
func devChunk(size int) int { return max(size, int(tune.GPUChunk)/size*size) }

// devRingChunks is the number of chunks of a device ring (and of a
// receiver's landing area, devLand): one being sent, one being packed,
// two more queued.
const devRingChunks = 4

// seg returns chunk i: hl reserved bytes, then chunk bytes of payload.
func (g *devRing) seg(i int) []byte {
	n := g.hl + g.chunk
	b := g.buf.Bytes()
	if b == nil { // freed: the device was closed first
		return nil
	}
	return b[i*n : (i+1)*n : (i+1)*n]
}

// segAddr is the address of chunk i's payload in an hmem ring.
func (g *devRing) segAddr(i int) uint64 { return g.addr + uint64(i*(g.hl+g.chunk)+g.hl) }

// pieces is the number of segments n payload bytes of a chunk go in.
func (g *devRing) pieces(n int) int { return (n + g.size - 1) / g.size }

// release counts k segments of chunk i as completed (or never to be
// posted); the chunk is free once none is left.
func (g *devRing) release(i, k int) {
	g.busy[i] -= k
	if g.busy[i] <= 0 {
		g.busy[i] = 0
		g.free = append(g.free, i)
	}
}

// devSeg is one chunk of a pipelined GPU send whose kernel was started:
// n payload bytes, sent of them posted.
type devSeg struct {
	idx, n, sent int
	ev           *gpu.Event
	packed       bool
}

// ensureDevRing returns v's segment ring of device d, allocating and
// registering it on first use (nil when it cannot: the send then packs
// into the endpoint's own segment buffers through the device's staging
// buffer).
func (v *vci) ensureDevRing(d *gpu.Device) *devRing {
	if g, ok := v.devRings[d]; ok {
		return g
	}
	if v.dom == nil || !v.ensureSegs() {
		return nil
	}
	depth := len(v.segs)
	g := v.hmemRing(d, depth)
	if g == nil {
		// The match header goes in front of each segment (sendFramed):
		// then a chunk is one segment buffer's payload. Without it a
		// chunk goes out in the host pipeline's segments (pipeseg: on shm
		// its inject size, the fastest there).
		hl, size := v.hdrLen(), v.segSize
		if hl == 0 {
			size = v.pipeSize
		}
		n := devRingBytes(size, hl, depth)
		b, err := d.AllocHost(int64(n))
		if err != nil {
			v.log.Warn("no pinned host ring on the GPU; staging through the device's buffer", "device", d, "err", err)
			return nil
		}
		mr, err := v.dom.Register(b.Bytes(), fabric.AccessSend)
		if err != nil {
			b.Free()
			v.log.Warn("cannot register the GPU's pinned host ring; staging through the device's buffer", "device", d, "err", err)
			return nil
		}
		g = newDevRing(size, hl, n)
		g.buf, g.mr = b, mr
	}
	for i := range g.busy {
		g.free = append(g.free, i)
	}
	if !v.watchDevice(d) { // closed meanwhile: nothing may stay registered on it
		g.mr.Close()
		return nil
	}
	if v.devRings == nil {
		v.devRings = map[*gpu.Device]*devRing{}
	}
	v.devRings[d] = g
	return g
}

// devPathOverride forces the GPU send path of the rings made from now on:
// "hmem" or "staging" (tests; nil: the probe decides). Forced "hmem" on a
// device whose memory has no FI_HMEM interface here (OpenCL) stands the
// device's mapped host memory, registered as host memory, in for device
// memory, so that the hmem send path runs without a GPU.
var devPathOverride atomic.Pointer[string]

// hmemRing returns a ring of depth segments in device memory registered
// with the provider (FI_HMEM), when the provider grants FI_HMEM for the
// device's memory and the endpoint carries the match word as CQ data (a
// header in front of each segment would have to be written into device
// memory); else nil and the caller stages through pinned host memory.
func (v *vci) hmemRing(d *gpu.Device, depth int) *devRing {
	force := ""
	if p := devPathOverride.Load(); p != nil {
		force = *p
	}
	n := int64(devRingBytes(v.segSize, 0, depth))
	if force == "hmem" {
		if g := v.standInRing(d, n); g != nil {
			pathStats.devRings[1].Add(1)
			return g
		}
	}
	why := ""
	switch {
	case force == "staging":
		why = "staging: forced"
	case v.hdr:
		why = "staging: the match word travels in a header in front of each segment"
	case d.Kind() != "cuda":
		why = "staging: " + d.Kind() + " memory has no FI_HMEM interface here"
	}
	if why != "" {
		v.log.Debug("GPU messages", "device", d, "transport", why)
		pathStats.devRings[0].Add(1)
		return nil
	}
	b, err := d.Alloc(n)
	if err != nil {
		v.log.Debug("GPU messages", "device", d, "transport", "staging: "+err.Error())
		pathStats.devRings[0].Add(1)
		return nil
	}
	how, mr := v.deviceTransport(b)
	v.log.Debug("GPU messages", "device", d, "transport", how)
	if mr == nil {
		b.Free()
		pathStats.devRings[0].Add(1)
		return nil
	}
	ptr, _, _ := b.CUDAPointer()
	pathStats.devRings[1].Add(1)
	g := newDevRing(v.segSize, 0, int(n))
	g.buf, g.mr, g.hmem, g.addr = b, mr, true, ptr
	return g
}

// standInRing is the forced hmem ring of a device whose memory has no
// FI_HMEM interface: its mapped host memory, registered as host memory
// and sent from by address as device memory is.
func (v *vci) standInRing(d *gpu.Device, n int64) *devRing {
	if v.hdr {
		return nil
	}
	b, err := d.AllocHost(n)
	if err != nil {
		return nil
	}
	mr, err := v.dom.Register(b.Bytes(), fabric.AccessSend)
	if err != nil {
		b.Free()
		return nil
	}
	g := newDevRing(v.segSize, 0, int(n))
	g.buf, g.mr, g.hmem, g.addr = b, mr, true, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes()))))
	return g
}

// devCloseWait bounds how long a device's close hook waits for v's lock
// and for the network operations posted from the device's memory.
const devCloseWait = 10 * time.Second

// devCloseWaitTest, when positive, replaces devCloseWait for the wait on
// posted segments (nanoseconds; tests).
var devCloseWaitTest atomic.Int64

// watchDevice registers v's close hook with device d (once per device);
// false when d is closed already.
func (v *vci) watchDevice(d *gpu.Device) bool {
	if _, ok := v.devHooks[d]; ok {
		return true
	}
	remove, ok := devhook.OnClose(d, func() { v.deviceClosed(d) })
	if !ok {
		return false
	}
	if v.devHooks == nil {
		v.devHooks = map[*gpu.Device]func(){}
	}
	v.devHooks[d] = remove
	return true
}

// tryLockFor takes v's lock as lock does, giving up after wait (the
// caller may be inside v's progress itself); true when taken, to be
// ended with unlock.
func (v *vci) tryLockFor(wait time.Duration) bool {
	end := time.Now().Add(wait)
	for i := 0; ; i++ {
		if v.shared {
			if v.mu.TryLock() {
				return true
			}
		} else if v.inside.TryForeign() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		if i < 1000 { // a driver lets go between progress calls: look often
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

func (v *vci) tryUnlock() {
	if v.shared {
		v.mu.Unlock()
	} else {
		v.inside.EndForeign()
	}
}

// deviceClosed is v's close hook of device d (gpu.Device.Close runs it
// before it frees the device's memory): the GPU sends on d's ring end
// with gpu.ErrClosed, the segments they posted are waited for (bounded by
// devCloseWait; progress completes or fails them), then the ring's
// registration is closed, receives into d end (failDevRecvs) and v
// forgets d.
func (v *vci) deviceClosed(d *gpu.Device) {
	if !v.tryLockFor(devCloseWait) {
		v.log.Warn("GPU closed while its endpoint stayed busy; its memory is freed without waiting for the network", "device", d)
		return
	}
	defer v.tryUnlock()
	if v.isClosed() {
		return // closeDevRings has run or will; it skips the closed device's memory
	}
	g := v.devRings[d]
	if g != nil {
		cerr := fmt.Errorf("endpoint: GPU send: %s was closed: %w", d, gpu.ErrClosed)
		var wait []*Request
		end1 := func(r *Request) {
			if r != nil && r.reqExt != nil && r.pipe != nil && r.pipe.ring == g && !r.done {
				v.finish(r, cerr) // waits for its kernels; posts nothing more
				if !r.done && !slices.Contains(wait, r) {
					wait = append(wait, r)
				}
			}
		}
		for seq, r := range v.rdvSends { // waiting for the CTS (a later one is dropped)
			if r.pipe != nil && r.pipe.ring == g {
				delete(v.rdvSends, seq)
				end1(r)
			}
		}
		for _, r := range v.pipes { // started
			end1(r)
		}
		for _, r := range v.slots { // segments on the wire
			end1(r)
		}
		end := time.Now().Add(devCloseWait)
		if w := devCloseWaitTest.Load(); w > 0 {
			end = time.Now().Add(time.Duration(w))
		}
		for len(wait) > 0 {
			if err := v.progress(); err != nil || time.Now().After(end) {
				v.log.Warn("GPU closed with sends from its memory still on the network", "device", d, "sends", len(wait), "err", err)
				// Their segments may still complete (a receiver that
				// resumes its progress): the sends end now, with
				// gpu.ErrClosed, and keep their slots until then.
				for _, r := range wait {
					r.done = true
				}
				break
			}
			n := 0
			for _, r := range wait {
				if !r.done {
					wait[n] = r
					n++
				}
			}
			wait = wait[:n]
		}
		if err := g.mr.Close(); err != nil {
			v.log.Warn("close the GPU ring's registration", "device", d, "err", err)
		}
		delete(v.devRings, d)
	}
	v.failDevRecvs(d)
	delete(v.devMaps, d)
	delete(v.devSegMaps, d)
	delete(v.devLands, d)
	delete(v.devHooks, d)
}

// failDevRecvs ends v's receives into device d, closed, with
// gpu.ErrClosed: unmatched ones at once, pipelined ones now (the rest of
// the message is dropped as it arrives), others when their data has
// arrived (their unpack is refused).
func (v *vci) failDevRecvs(d *gpu.Device) {
	onDev := func(r *Request) bool {
		return r.reqExt != nil && r.typed != nil && r.typed.dev != nil && r.typed.dev.Buf.Device() == d
	}
	cerr := fmt.Errorf("endpoint: GPU receive: %s was closed: %w", d, gpu.ErrClosed)
	for r := v.posted.head; r != nil; {
		next := r.qnext
		if onDev(r) && r.state == stPosted {
			v.posted.remove(r)
			v.finish(r, cerr)
		}
		r = next
	}
	for _, r := range v.slots {
		if r == nil || r.state == stDone || !onDev(r) {
			continue
		}
		if r.piping {
			r.piping = false
			v.finish(r, cerr)
		} else if r.err == nil {
			r.err = cerr
		}
	}
}

// closeDevRings deregisters and frees v's device rings (a device closed
// before the endpoint has freed them already).
func (v *vci) closeDevRings() error {
	var out []error
	for d, remove := range v.devHooks {
		remove()
		delete(v.devHooks, d)
	}
	for d, g := range v.devRings {
		out = append(out, g.mr.Close())
		if err := g.buf.Free(); err != nil && !errors.Is(err, gpu.ErrClosed) {
			out = append(out, err)
		}
		delete(v.devRings, d)
	}
	for d, l := range v.devLands {
		if l != nil {
			if err := l.buf.Free(); err != nil && !errors.Is(err, gpu.ErrClosed) {
				out = append(out, err)
			}
		}
		delete(v.devLands, d)
	}
	for _, maps := range []map[*gpu.Device]*gpu.Buffer{v.devMaps, v.devSegMaps} {
		for d, m := range maps {
			if m != nil {
				if err := m.Free(); err != nil && !errors.Is(err, gpu.ErrClosed) {
					out = append(out, err)
				}
			}
			delete(maps, d)
		}
	}
	return errors.Join(out...)
}

// devRecvCopy forces the receive fallback (each piece copied into the
// device's staging buffer) instead of unpacking from the mapped bounce
// buffers (tests).
var devRecvCopy atomic.Bool

// devAssumeDiscrete makes receives treat every device as a discrete GPU
// (tests: pocl shares the host's memory).
var devAssumeDiscrete atomic.Bool

// devSendCopy forces eager GPU sends to pack through the device's staging
// buffer instead of in place in the mapped segment buffers (tests and
// benchmarks).
var devSendCopy atomic.Bool

// devMapped returns the mapping into device d of all, one of v's
// registered host regions, made on first use and kept in *maps; nil
// (and no error) when d cannot map it, what naming it in the log.
func (v *vci) devMapped(d *gpu.Device, all []byte, maps *map[*gpu.Device]*gpu.Buffer, what string) (*gpu.Buffer, error) {
	if m, ok := (*maps)[d]; ok {
		return m, nil
	}
	m, err := d.MapHost(all)
	if err != nil {
		if errors.Is(err, gpu.ErrClosed) {
			return nil, err
		}
		v.log.Debug("cannot map "+what+" into the GPU; going through its staging buffer", "device", d, "err", err)
		m = nil
	}
	if !v.watchDevice(d) { // closed meanwhile: its Close frees the mapping
		return nil, gpu.ErrClosed
	}
	if *maps == nil {
		*maps = map[*gpu.Device]*gpu.Buffer{}
	}
	(*maps)[d] = m
	return m, nil
}

// devPackTx packs the stream's bytes from off of GPU data into piece: in
// place, by one kernel, when piece lies in v's segment buffers and the
// device can map them (an eager GPU send); else through the device's
// staging buffer (a kernel and a copy).
func (v *vci) devPackTx(t *gpu.Typed, off int, piece []byte) error {
	var region []byte
	if v.segBuf != nil {
		region = v.segBuf.Bytes()
	}
	return v.devMove(t, off, piece, region, &v.devSegMaps, "the segment buffers", &pathStats.devSend, devSendCopy.Load(), false)
}

// devUnpackRx unpacks piece, the stream's bytes from off, into GPU data:
// on a device that shares the host's memory (gpu.Device.Integrated),
// straight from v's bounce buffers, mapped into the device (MapHost: no
// host copy), when piece lies in them and the device can map them; else,
// and on a discrete GPU (where a 12 KiB message read in place took twice
// as long on an H200 as one copied first), through the device's staging
// buffer (a host copy into the device's pinned buffer, and a launch).
func (v *vci) devUnpackRx(t *gpu.Typed, off int, piece []byte) error {
	var region []byte
	if v.bounce != nil {
		region = v.bounce.Bytes()
	}
	discrete := !t.Buf.Device().Integrated() || devAssumeDiscrete.Load()
	return v.devMove(t, off, piece, region, &v.devMaps, "the bounce buffers", &pathStats.devRecv, devRecvCopy.Load() || discrete, true)
}

// devMove packs the stream's bytes from off of GPU data t into piece, or
// unpacks them from it: in place, by one kernel, where piece lies in
// region (one of v's registered host regions) and the device maps region
// (kept in *maps; what names it in the log); else, and when viaCopy is
// set, through the device's staging buffer. stats[0] counts the pieces
// that went through the staging buffer, stats[1] those moved in place.
func (v *vci) devMove(t *gpu.Typed, off int, piece, region []byte, maps *map[*gpu.Device]*gpu.Buffer, what string,
	stats *[2]atomic.Int64, viaCopy, unpack bool) error {
	d := t.Buf.Device()
	staged := func() error {
		stats[0].Add(1)
		if unpack {
			return devUnpack(t, off, piece)
		}
		return devPack(t, off, piece)
	}
	if region == nil || viaCopy || !within(piece, region) {
		return staged()
	}
	m, err := v.devMapped(d, region, maps, what)
	if err != nil {
		op := "pack"
		if unpack {
			op = "unpack"
		}
		return fmt.Errorf("endpoint: %s on %s: %w", op, d, err)
	}
	if m == nil {
		return staged()
	}
	stats[1].Add(1)
	var n int64
	if unpack {
		n, err = d.Unpack(context.Background(), *t, m, offsetIn(piece, region), int64(off), int64(len(piece)))
	} else {
		n, err = d.Pack(context.Background(), m, offsetIn(piece, region), *t, int64(off), int64(len(piece)))
	}
	if err == nil && n != int64(len(piece)) {
		err = fmt.Errorf("moved %d of %d bytes: %w", n, len(piece), errs.ErrOutOfRange)
	}
	return err
}

// devLand is an endpoint's landing area on one device: devRingChunks
// chunks of gpuchunk bytes of pinned host memory mapped into the device
// (gpu.Device.AllocHost). The segments of a pipelined GPU receive are
// copied there as they arrive (a host copy of a few KiB, the bounce
// buffer free again at once), and each full chunk is unpacked by one
// kernel, started without waiting: one launch per chunk instead of one
// per segment.
type devLand struct {
	buf   *gpu.Buffer
	chunk int
	free  []int
}

// landRecv is a pipelined GPU receive's use of its endpoint's landing
// area.
type landRecv struct {
	r    *Request
	l    *devLand
	idx  int // chunk being filled; -1: none
	base int // stream offset of its first byte
	fill int // bytes in it
	pend []landChunk
}

// landChunk is a chunk whose unpack kernel was started.
type landChunk struct {
	idx int
	ev  *gpu.Event
}

// landing returns v's landing area on device d, allocating it on first
// use; nil when there is none (segments are then unpacked one by one).
func (v *vci) landing(d *gpu.Device) *devLand {
	if l, ok := v.devLands[d]; ok {
		return l
	}
	chunk := int(tune.GPUChunk)
	var l *devLand
	b, err := d.AllocHost(int64(devRingChunks * chunk))
	if err != nil {
		if errors.Is(err, gpu.ErrClosed) {
			return nil
		}
		v.log.Debug("no landing area on the GPU; segments unpacked one by one", "device", d, "err", err)
	} else {
		l = &devLand{buf: b, chunk: chunk}
		for i := range devRingChunks {
			l.free = append(l.free, i)
		}
	}
	if !v.watchDevice(d) { // closed meanwhile
		if b != nil {
			b.Free()
		}
		return nil
	}
	if v.devLands == nil {
		v.devLands = map[*gpu.Device]*devLand{}
	}
	v.devLands[d] = l
	return l
}

// devLandTake gathers piece, the stream's bytes from off of pipelined GPU
// receive r, into r's landing chunk, starting the chunk's unpack kernel
// once it is full (pipeRecvDone starts the last one). False when r has
// no landing area (none could be made, or the per-segment path is
// forced): the caller unpacks the piece itself.
func (v *vci) devLandTake(r *Request, off int, piece []byte) bool {
	if devRecvCopy.Load() {
		return false
	}
	x := r.land
	if x == nil {
		l := v.landing(r.typed.dev.Buf.Device())
		if l == nil {
			return false
		}
		x = &landRecv{r: r, l: l, idx: -1}
		r.land = x
	}
	c := r.capacity()
	if off >= c {
		return true // past a truncated receive's end: dropped
	}
	piece = piece[:min(len(piece), c-off)]
	for len(piece) > 0 {
		if x.idx >= 0 && off != x.base+x.fill {
			x.flush()
		}
		if x.idx < 0 && !x.take(off) {
			// Every chunk is another receive's: this piece alone.
			r.take(off, piece)
			return true
		}
		b := x.l.buf.Bytes()
		if b == nil { // the device was closed under the receive
			if r.err == nil {
				r.err = fmt.Errorf("endpoint: GPU receive: %s was closed: %w", r.typed.dev.Buf.Device(), gpu.ErrClosed)
			}
			return true
		}
		k := min(len(piece), x.l.chunk-x.fill)
		copy(b[x.idx*x.l.chunk+x.fill:], piece[:k])
		x.fill += k
		off += k
		piece = piece[k:]
		if x.fill == x.l.chunk {
			x.flush()
		}
	}
	return true
}

// take makes a free chunk, for stream offset off, the one being filled,
// first retiring r's own finished unpacks (waiting for the oldest when
// none is free); false when every chunk is another receive's.
func (x *landRecv) take(off int) bool {
	x.retire(false)
	for len(x.l.free) == 0 && len(x.pend) > 0 {
		x.retire(true)
	}
	n := len(x.l.free)
	if n == 0 {
		return false
	}
	x.idx, x.base, x.fill = x.l.free[n-1], off, 0
	x.l.free = x.l.free[:n-1]
	return true
}

// flush starts the unpack kernel of the chunk being filled.
func (x *landRecv) flush() {
	i := x.idx
	if i < 0 {
		return
	}
	x.idx = -1
	if x.fill == 0 {
		x.l.free = append(x.l.free, i)
		return
	}
	u := x.r.typed
	ev, err := u.dev.Buf.Device().UnpackAsync(context.Background(), *u.dev, x.l.buf, int64(i*x.l.chunk), int64(x.base), int64(x.fill))
	if err == nil && ev.Len() != int64(x.fill) {
		err = fmt.Errorf("unpacked %d of %d bytes: %w", ev.Len(), x.fill, errs.ErrOutOfRange)
	}
	if err != nil {
		x.l.free = append(x.l.free, i)
		x.fail(err)
		return
	}
	pathStats.devLanded.Add(1)
	x.pend = append(x.pend, landChunk{idx: i, ev: ev})
}

// retire gives back the chunks whose unpack has completed, in order;
// with wait, it first waits for the oldest.
func (x *landRecv) retire(wait bool) {
	for len(x.pend) > 0 {
		c := x.pend[0]
		var err error
		if wait {
			err = c.ev.Wait(context.Background())
			wait = false
		} else if done, e := c.ev.Done(); !done {
			return
		} else {
			err = e
		}
		x.fail(err)
		x.l.free = append(x.l.free, c.idx)
		x.pend = x.pend[1:]
	}
}

// fail makes err, an unpack's error, r's error.
func (x *landRecv) fail(err error) {
	if err != nil && x.r.err == nil {
		x.r.err = fmt.Errorf("endpoint: unpack into %s: %w", x.r.typed.String(), err)
	}
}

// landEnd waits for r's unpack kernels and gives its chunks back (a
// chunk being filled when r ends early is dropped).
func (r *Request) landEnd() {
	x := r.land
	r.land = nil
	for len(x.pend) > 0 {
		x.retire(true)
	}
	if x.idx >= 0 {
		x.l.free = append(x.l.free, x.idx)
		x.idx = -1
	}
}

// pumpDev drives pipelined GPU send r: it starts the pack kernels of the
// next chunks into free ring chunks (enqueued, not waited for), and posts
// each chunk's segments, in order, once its kernel has completed.
// Progress calls it again; it never blocks on the device.
func (v *vci) pumpDev(r *Request) {
	p := r.pipe
	if r.state == stDone {
		return
	}
	g, d := p.ring, p.u.dev.Buf.Device()
	if g.hmem && !p.directTried {
		p.directTried = true
		v.startDirect(r)
	}
	if p.direct {
		v.pumpDirect(r)
		return
	}
	for p.enq < p.want {
		n := len(g.free)
		if n == 0 {
			break
		}
		idx := g.free[n-1]
		k := min(g.chunk, p.want-p.enq)
		ev, err := d.PackAsync(context.Background(), g.buf, int64(idx*(g.hl+g.chunk)+g.hl), *p.u.dev, int64(p.enq), int64(k))
		if err == nil && ev.Len() != int64(k) {
			err = fmt.Errorf("packed %d of %d bytes: %w", ev.Len(), k, errs.ErrOutOfRange)
		}
		if err != nil {
			v.failDev(r, fmt.Errorf("endpoint: pack %s on %s: %w", p.u, d, err))
			return
		}
		g.free = g.free[:n-1]
		g.busy[idx] = g.pieces(k)
		p.inflight = append(p.inflight, devSeg{idx: idx, n: k, ev: ev})
		p.enq += k
	}
	data := ctrlBit | rtsBit | pipeDataBit | (r.seq&pipeSeqMask)<<pipeTokBits | p.token&pipeTokMask
	for len(p.inflight) > 0 {
		s := &p.inflight[0]
		if !s.packed {
			done, err := s.ev.Done()
			if err != nil {
				v.failDev(r, fmt.Errorf("endpoint: pack %s on %s: %w", p.u, d, err))
				return
			}
			if !done {
				return
			}
			s.packed = true
		}
		for s.sent < s.n {
			if r.pending >= len(v.segs) {
				// As many segments in flight as the host pipeline's ring
				// holds: the rest go as these complete (segDone pumps).
				return
			}
			k := min(g.size, s.n-s.sent)
			ctx := v.handle(r) | segBit | uint64(s.idx)<<32
			var err error
			if g.hmem { // from device memory (FI_HMEM); no header in front
				err = v.ep.SendDataDevice(g.segAddr(s.idx)+uint64(s.sent), k, g.mr.Desc(), data, r.qdest, ctx)
			} else if seg := g.seg(s.idx); seg == nil { // the device was closed under the send, freeing its ring
				err = fmt.Errorf("endpoint: the send ring on %s: %w", d, gpu.ErrClosed)
			} else { // hl > 0 only with one segment per chunk (sent is 0)
				err = v.sendFramed(seg[s.sent:s.sent+g.hl+k], g.mr.Desc(), data, r.qdest, ctx)
			}
			if !v.segPosted(r, err, v.failDev) {
				return
			}
			s.sent += k
			p.off += k
			r.pending++
		}
		p.inflight = p.inflight[1:]
	}
	if p.off == p.want && len(p.inflight) == 0 && r.pending == 0 {
		v.finish(r, nil)
	}
}

// startDirect registers the user's buffer of contiguous GPU send r for
// the message (FI_HMEM; the stand-in's host registration when the hmem
// path is forced on memory without an interface), so that its segments go
// straight from there (pumpDirect); the registration is r's until its
// sends complete. Nothing changes when that cannot be done: the segments
// are then copied into the hmem ring on the device.
func (v *vci) startDirect(r *Request) {
	p := r.pipe
	lo, ok, err := p.u.dev.Contiguous()
	if err != nil || !ok {
		return
	}
	b := p.u.dev.Buf
	var mr *fabric.MR
	var addr uint64
	if ptr, _, isCUDA := b.CUDAPointer(); isCUDA {
		how, m := v.deviceTransport(b)
		if m == nil {
			v.log.Debug("contiguous GPU send copied into the hmem ring", "why", how)
			return
		}
		mr, addr = m, ptr
	} else if f := devPathOverride.Load(); f != nil && *f == "hmem" && b.Bytes() != nil {
		m, err := v.dom.Register(b.Bytes(), fabric.AccessSend)
		if err != nil {
			return
		}
		mr, addr = m, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes()))))
	} else {
		return
	}
	r.mrs = append(r.mrs, mr)
	p.direct, p.directAddr, p.directDesc = true, addr+uint64(lo), mr.Desc()
	pathStats.devDirect.Add(1)
}

// pumpDirect posts the segments of contiguous GPU send r straight from
// the user's registered buffer, at most the ring's depth in flight.
func (v *vci) pumpDirect(r *Request) {
	p, g := r.pipe, r.pipe.ring
	data := ctrlBit | rtsBit | pipeDataBit | (r.seq&pipeSeqMask)<<pipeTokBits | p.token&pipeTokMask
	for p.off < p.want && r.pending < len(v.segs) { // as many in flight as the ring has segments
		k := min(g.size, p.want-p.off)
		err := v.ep.SendDataDevice(p.directAddr+uint64(p.off), k, p.directDesc, data, r.qdest, v.handle(r)|segBit|directBit)
		if !v.segPosted(r, err, v.finish) {
			return
		}
		p.off += k
		r.pending++
	}
	if p.off == p.want && r.pending == 0 {
		v.finish(r, nil)
	}
}

// failDev finishes GPU send r with err, once the kernels it started have
// completed (their segments go back to the ring).
func (v *vci) failDev(r *Request, err error) {
	r.pipe.drain()
	v.finish(r, err)
}

// drain waits for the kernels p started and gives back to the ring what
// of their chunks was not posted (a chunk partly on the wire is free once
// its posted segments complete).
func (p *pipeSend) drain() {
	g := p.ring
	for _, s := range p.inflight {
		_ = s.ev.Wait(context.Background())
		g.release(s.idx, g.pieces(s.n)-g.pieces(s.sent))
	}
	p.inflight = nil
}

// hmemProviders caches fabric.HMEMSupported per provider name.
var hmemProviders sync.Map // provider → bool

// deviceTransport says how v moves GPU memory b: "hmem" when the
// provider grants FI_HMEM and registers b's device memory itself
// (fi_mr_regattr with FI_HMEM_CUDA; the registration is returned, the
// caller closes it), else "staging" and why: GPU data then goes through
// pinned host memory mapped into the device.
func (v *vci) deviceTransport(b *gpu.Buffer) (how string, mr *fabric.MR) {
	if v.dom == nil {
		return "staging: no libfabric domain", nil
	}
	prov := v.info.Provider
	ok, known := hmemProviders.Load(prov)
	if !known {
		ok = fabric.HMEMSupported(prov)
		hmemProviders.Store(prov, ok)
	}
	if !ok.(bool) {
		return "staging: provider " + prov + " does not grant FI_HMEM", nil
	}
	ptr, dev, isCUDA := b.CUDAPointer()
	if !isCUDA {
		return "staging: " + b.Device().Kind() + " memory has no FI_HMEM interface here", nil
	}
	mr, err := v.dom.RegisterDevice(ptr, int(b.Len()), fabric.HMEMCUDA, dev, fabric.AccessSend|fabric.AccessRemoteRead)
	if err != nil {
		return "staging: " + err.Error(), nil
	}
	return "hmem", mr
}
