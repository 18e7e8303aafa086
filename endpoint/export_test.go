package endpoint

import (
	"time"

	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/choose"
)

// ParkedEndpoints reports how many freed endpoints of w wait for the other
// endpoints of their communicator in this process (peerset.go).
func ParkedEndpoints(w *World) int { return w.parkedEndpoints() }

// OpenEndpoints reports how many endpoints of w World.Close would close.
func OpenEndpoints(w *World) int { return w.vciCount() }

// FabricOpen reports whether w has opened libfabric.
func FabricOpen(w *World) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dom != nil
}

// TypedPaths reports how many typed messages this process sent to
// libfabric peers eagerly from segment buffers, by zero copy and by
// pipeline, how many rendezvous receives read into the user's blocks or
// into a buffer unpacked at the end, and how many messages it sent
// packed whole.
func TypedPaths() [6]int64 {
	s := &pathStats
	return [6]int64{s.eager.Load(), s.zeroCopy.Load(), s.pipeline.Load(), s.recvBlocks.Load(), s.recvUnpack.Load(), s.packed.Load()}
}

// SetTypedPath overrides WEFT_TUNE's typedpath ("" restores it) and, when
// zc > 0, its zcblock, for this process.
func SetTypedPath(path string, zc int) {
	if path == "" {
		pathOverride.Store(nil)
	} else {
		pathOverride.Store(&path)
	}
	zcOverride.Store(int64(zc))
}

// MatchHeader reports whether w's own endpoint carries the match word in
// a header (matchhdr.go) rather than in remote CQ data.
func MatchHeader(w *World) bool { return CommMatchHeader(w.comm) }

// CommMatchHeader reports whether c's endpoint carries the match word in
// a header.
func CommMatchHeader(c *Comm) bool {
	v := c.v
	v.lock()
	defer v.unlock()
	return v.hdr
}

// ForceMatchHeader sets WEFT_TUNE's epmatchhdr for this process (before Init).
func ForceMatchHeader(on bool) { forceMatchHdr = on }

// MediumCounts reports how many messages c sent to rank r through the
// node transport's medium slots, and how many medium messages found every
// slot busy (and went by rendezvous); ok is false when the pair has no
// slot area.
func MediumCounts(c *Comm, r int) (sent, busy int64, ok bool) {
	l := c.link(r)
	if l == nil || l.medOut == nil {
		return 0, 0, false
	}
	c.v.lock()
	defer c.v.unlock()
	return l.medOut.sent, l.medOut.busy, true
}

// CopyCounts reports how many messages c sent to rank r by the node
// transport's pipelined copy through the medium slots; ok is false when
// the pair has no slot area.
func CopyCounts(c *Comm, r int) (copies int64, ok bool) {
	l := c.link(r)
	if l == nil || l.cpOut == nil {
		return 0, false
	}
	c.v.lock()
	defer c.v.unlock()
	return l.cpOut.copies, true
}

// CopyFragments reports how many fragments c's pipelined copies to rank
// r took in all.
func CopyFragments(c *Comm, r int) int64 {
	l := c.link(r)
	if l == nil || l.cpOut == nil {
		return 0
	}
	c.v.lock()
	defer c.v.unlock()
	return l.cpOut.frags
}

// CopyInProgress reports whether c's endpoint has a pipelined copy to
// rank r in progress.
func CopyInProgress(c *Comm, r int) bool {
	l := c.link(r)
	if l == nil {
		return false
	}
	c.v.lock()
	defer c.v.unlock()
	return l.cout != nil
}

// MediumLimit reports the largest message c sends to rank r through a
// medium slot (0: none).
func MediumLimit(c *Comm, r int) int {
	if l := c.link(r); l != nil && l.medOut != nil {
		return l.medOut.size
	}
	return 0
}

// PipeRing returns the segment size and the number of segments of c's
// pipeline rings (the endpoint's and each GPU's), and its eager limit.
func PipeRing(c *Comm) (seg, depth, eager int) {
	return int(min(tune.PipeSeg, int64(c.v.eagerLimit))), int(tune.PipeDepth), c.v.eagerLimit
}

// DeviceTransport says how c's endpoint would move GPU memory b ("hmem"
// or "staging: why").
func DeviceTransport(c *Comm, b *gpu.Buffer) string {
	how, mr := c.v.deviceTransport(b)
	if mr != nil {
		mr.Close()
	}
	return how
}

// ForceDevicePath forces the GPU send path of the rings made from now on:
// "hmem" (on OpenCL, the device's mapped host memory stands in for device
// memory registered with FI_HMEM), "staging", or "" (the probe decides).
func ForceDevicePath(path string) {
	if path == "" {
		devPathOverride.Store(nil)
	} else {
		devPathOverride.Store(&path)
	}
}

// ForceDeviceRecvCopy makes GPU receives unpack every piece through the
// device's staging buffer instead of from the mapped bounce buffers.
func ForceDeviceRecvCopy(on bool) { devRecvCopy.Store(on) }

// DevicePaths reports the GPU send rings this process made for staging
// and for hmem, and the received pieces it unpacked through the staging
// buffer and straight from mapped bounce buffers.
func DevicePaths() (stagingRings, hmemRings, recvCopied, recvMapped int64) {
	s := &pathStats
	return s.devRings[0].Load(), s.devRings[1].Load(), s.devRecv[0].Load(), s.devRecv[1].Load()
}

// SetDeviceCloseWait bounds a device close hook's wait for the segments
// its sends posted (0: the default, 10 s).
func SetDeviceCloseWait(d time.Duration) { devCloseWaitTest.Store(int64(d)) }

// AssumeDiscreteDevice makes GPU receives treat every device as a
// discrete GPU (eager pieces unpacked through the staging buffer).
func AssumeDiscreteDevice(on bool) { devAssumeDiscrete.Store(on) }

// ForceDeviceSendCopy makes eager GPU sends pack through the device's
// staging buffer instead of in place in the mapped segment buffers.
func ForceDeviceSendCopy(on bool) { devSendCopy.Store(on) }

// DeviceSendPaths reports the eager GPU sends this process packed through
// the staging buffer and in place in mapped segment buffers.
func DeviceSendPaths() (copied, mapped int64) {
	return pathStats.devSend[0].Load(), pathStats.devSend[1].Load()
}

// DeviceLanded reports the landing chunks of pipelined GPU receives this
// process unpacked (one kernel each).
func DeviceLanded() int64 { return pathStats.devLanded.Load() }

// DeviceDirectSends reports the contiguous GPU sends this process sent
// straight from the user's buffer (hmem path).
func DeviceDirectSends() int64 { return pathStats.devDirect.Load() }

// MediumFirst is the size from which a message the ring could carry
// inline takes a free medium slot.
const MediumFirst = medFirst

// HoldSegments takes every free segment buffer of c's endpoint (eager
// typed sends to libfabric peers then find none) until release is
// called.
func HoldSegments(c *Comm) (release func()) {
	v := c.v
	v.lock()
	defer v.unlock()
	v.ensureSegs()
	held := append([]int(nil), v.segFree...)
	v.segFree = v.segFree[:0]
	return func() {
		v.lock()
		v.segFree = append(v.segFree, held...)
		v.unlock()
	}
}

// WayEstimates reports the time per byte (ns) c's link to rank r has
// measured for sends of n bytes by the pipelined copy and by the single
// copy (0: not measured; ok false: no link).
func WayEstimates(c *Comm, r, n int) (pipe, single float64, ok bool) {
	return estimates(c, r, n, func(l *nodeLink) *choose.Pair { return &l.way.Pair })
}

// FillEstimates reports the time per byte (ns) c's link to rank r has
// measured for typed pipelined sends of n bytes packed straight into the
// slots and packed privately and streamed (0: not measured; ok false: no
// link).
func FillEstimates(c *Comm, r, n int) (plain, stream float64, ok bool) {
	return estimates(c, r, n, func(l *nodeLink) *choose.Pair { return &l.fill })
}

// estimates reports the two ways' estimates for n bytes of the chooser
// of c's link to rank r that pair picks.
func estimates(c *Comm, r, n int, pair func(*nodeLink) *choose.Pair) (way0, way1 float64, ok bool) {
	l := c.link(r)
	if l == nil {
		return 0, 0, false
	}
	c.v.lock()
	defer c.v.unlock()
	p := pair(l)
	return p.Estimate(0, n), p.Estimate(1, n), true
}

// ContextQuarantine is how many freed context ids a process keeps from
// reuse (ctxid.go).
const ContextQuarantine = ctxQuarantine
