package onesided

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/peerwatch"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/internal/wlog"
)

var log = wlog.Named("onesided")

// ShmMode selects how a window reaches ranks on its own node.
type ShmMode int

const (
	// ShmAuto uses direct stores for ranks on this node and libfabric for
	// the others (the default; env WEFT_ONESIDED_SHM=auto).
	ShmAuto ShmMode = iota
	// ShmOff sends every operation to other ranks through libfabric
	// (WEFT_ONESIDED_SHM=off). Puts and gets on this rank's own region are
	// plain copies; atomics on it still go through libfabric.
	ShmOff
	// ShmOnly requires every rank to be on this node and never opens a
	// libfabric endpoint (WEFT_ONESIDED_SHM=on).
	ShmOnly
)

// String is the WEFT_ONESIDED_SHM spelling of the mode.
func (m ShmMode) String() string {
	switch m {
	case ShmAuto:
		return "auto"
	case ShmOff:
		return "off"
	case ShmOnly:
		return "on"
	}
	return fmt.Sprintf("ShmMode(%d)", int(m))
}

// ParseShmMode parses "auto", "on" (or "only") and "off".
func ParseShmMode(s string) (ShmMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return ShmAuto, nil
	case "on", "only", "1", "true":
		return ShmOnly, nil
	case "off", "0", "false":
		return ShmOff, nil
	}
	return ShmAuto, fmt.Errorf("onesided: shared-memory mode %q (want auto, on or off): %w", s, ErrInvalid)
}

// SignalOrdering is how the libfabric path keeps a signal behind its data.
type SignalOrdering int

const (
	// OrderAuto picks OrderCQData when the provider grants write-after-write
	// ordering and 8 bytes of remote CQ data and has manual data progress,
	// else OrderWAW when it grants write-after-write ordering, else
	// OrderFence when it supports FI_FENCE, else OrderDelivery (env
	// WEFT_ONESIDED_ORDER=auto).
	OrderAuto SignalOrdering = iota
	// OrderWAW issues data and signal back to back and relies on the
	// provider's FI_ORDER_WAW guarantee (WEFT_ONESIDED_ORDER=waw).
	OrderWAW
	// OrderFence issues the signal write with FI_FENCE
	// (WEFT_ONESIDED_ORDER=fence).
	OrderFence
	// OrderDelivery waits for delivery completion of the data before it
	// issues the signal write (WEFT_ONESIDED_ORDER=delivery). It needs no
	// provider ordering at all.
	OrderDelivery
	// OrderCQData carries the signal as remote CQ data of the data's own
	// write (one injected write for small data); the target stores it into
	// its signal word when it reads its completion queue, which it does in
	// every call that drives progress on the window (WaitSignal,
	// TestSignal, Flush, Fence, further operations). The completion exists
	// only once the data is placed, so the signal cannot overtake it.
	// Successive writes to one target stay in order by write-after-write
	// ordering, which it needs besides 8 bytes of CQ data
	// (WEFT_ONESIDED_ORDER=cqdata). Signals to a rank that cannot take them
	// go the OrderWAW way.
	OrderCQData
)

// String is the WEFT_ONESIDED_ORDER spelling of the ordering.
func (o SignalOrdering) String() string {
	switch o {
	case OrderAuto:
		return "auto"
	case OrderWAW:
		return "waw"
	case OrderFence:
		return "fence"
	case OrderDelivery:
		return "delivery"
	case OrderCQData:
		return "cqdata"
	}
	return fmt.Sprintf("SignalOrdering(%d)", int(o))
}

// ParseSignalOrdering parses "auto", "waw", "fence", "delivery" and
// "cqdata".
func ParseSignalOrdering(s string) (SignalOrdering, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return OrderAuto, nil
	case "waw":
		return OrderWAW, nil
	case "fence":
		return OrderFence, nil
	case "delivery", "dc":
		return OrderDelivery, nil
	case "cqdata", "cq-data", "cq":
		return OrderCQData, nil
	}
	return OrderAuto, fmt.Errorf("onesided: signal ordering %q (want auto, waw, fence, delivery or cqdata): %w", s, ErrInvalid)
}

type options struct {
	shm       ShmMode
	order     SignalOrdering
	provider  string
	wait      string        // wait policy: auto, spin or yield
	timeout   time.Duration // opTimeout of the window's calls that take no context
	heapCheck bool          // NewHeap: check block headers on every call (WEFT_TUNE heapcheck)
	// casFallback makes the libfabric path take the compare-and-swap
	// fallback for every atomic except reads, so tests cover it on
	// providers that grant every atomic (no public option).
	casFallback bool
	err         error
}

// Option configures Allocate, Create and NewHeap.
type Option func(*options)

// WithSharedMemory selects the intra-node path; it overrides
// WEFT_ONESIDED_SHM.
func WithSharedMemory(m ShmMode) Option { return func(o *options) { o.shm = m } }

// WithSignalOrdering forces how PutSignal orders data and signal on the
// libfabric path; it overrides WEFT_ONESIDED_ORDER. Forcing an ordering the
// provider does not grant makes Allocate fail with ErrNotSupported.
func WithSignalOrdering(s SignalOrdering) Option { return func(o *options) { o.order = s } }

// WithProvider names the libfabric provider a window opens its own domain
// with when the group supplies none (for example "shm", "tcp;ofi_rxm",
// "sockets"); WEFT_PROVIDER applies otherwise.
func WithProvider(name string) Option { return func(o *options) { o.provider = name } }

// WithWaitPolicy picks how the window's waits pace themselves: "auto"
// (the default: "yield" when the group's ranks on this machine outnumber its
// cores, else "spin"), "spin" or "yield" (see WEFT_ONESIDED_WAIT); it
// overrides WEFT_ONESIDED_WAIT.
func WithWaitPolicy(name string) Option {
	return func(o *options) {
		switch name {
		case "auto", "spin", "yield":
			o.wait = name
		default:
			o.err = fmt.Errorf("onesided: wait policy %q (want auto, spin or yield): %w", name, ErrInvalid)
		}
	}
}

// WithTimeout bounds the waits of the window's calls that take no context
// (FetchAndOp, CompareAndSwap, an operation stuck behind a full queue),
// which then fail with ErrTimeout; it overrides WEFT_ONESIDED_TIMEOUT
// (default 2 minutes).
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.err = fmt.Errorf("onesided: timeout %v not positive: %w", d, ErrInvalid)
			return
		}
		o.timeout = d
	}
}

// resolveOptions starts from the settings (internal/settings: the
// WEFT_ONESIDED_* variables and WEFT_TUNE) and applies opts. A bad setting,
// like a bad option, is o.err, wrapping ErrInvalid.
func resolveOptions(opts []Option) options {
	var o options
	if err := settings.Check(""); err != nil {
		o.err = fmt.Errorf("onesided: %w: %w", err, ErrInvalid)
		return o
	}
	v, _, _ := settings.Str("WEFT_ONESIDED_SHM")
	o.shm, _ = ParseShmMode(v)
	v, _, _ = settings.Str("WEFT_ONESIDED_ORDER")
	o.order, _ = ParseSignalOrdering(v)
	o.wait, _, _ = settings.Str("WEFT_ONESIDED_WAIT")
	o.timeout, _, _ = settings.DurationValue("WEFT_ONESIDED_TIMEOUT")
	o.heapCheck = tune.HeapCheck
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Window is a region of memory on every rank of a group that the others may
// access with one-sided operations. A Window is not safe for concurrent use
// by several goroutines: give each goroutine its own window.
type Window struct {
	prof   *profile // the world's counts of one-sided operations, when it counts (stats.go)
	procOf []int32  // with prof: the world rank of each window rank
	// oneMachine: every rank of the group runs on this machine (see
	// oneMachine), so shm reaches them all.
	oneMachine bool
	g          Group
	rank       int
	size       int
	sizes      []int
	opts       options
	log        hclog.Logger

	local  []byte   // this rank's region
	peers  [][]byte // direct-store view of each rank's region; nil = via net
	ctrl   [][]byte // direct-store view of each rank's control words
	myCtrl []byte   // this rank's control words (in front of local)
	// ctrlLen is the length of each rank's control words: the fixed
	// ones and the bitmaps of post and complete (pscw.go).
	ctrlLen int
	epoch   uint64 // barriers completed
	netOff  int    // offset of the user region in the registered one
	seg     *nodeseg.Seg
	anon    []byte
	net     netPath // nil when every target is direct store
	// atomicsNet sends every atomic, even to ranks on this node, through
	// net so that all atomics on a location come from one engine.
	atomicsNet bool
	closed     bool
	wait       waitPolicy // how this window's waits pace themselves (wait.go)
	// procPeers is the set of this window's ranks in this process when
	// there are several and the window has a libfabric path (procpeers.go).
	procPeers *procPeers
	// watch tells waits whether a rank's process (on this node) has
	// exited (internal/peerwatch), by window rank.
	watch *peerwatch.Watch
	// waiters counts goroutines inside WaitSignal and TestSignal; Free
	// sets freeing, makes them leave (with ErrClosed) and waits until
	// they have before it unmaps anything.
	waiters atomic.Int32
	freeing atomic.Bool
	// typed is the scratch of PutTyped and GetTyped on the libfabric
	// path, kept so that a repeated transfer allocates nothing.
	typed typedScratch
	// locks are the targets this rank holds a Lock on: true for an
	// exclusive lock (winlock.go).
	locks map[int]bool
	// pscw is the state of Post, Start, Complete and Wait (pscw.go).
	pscw pscwState
	// dyn, on a dynamic window, is each target's Regions this rank has
	// addressed, by index (the index sits in the encoded offsets of
	// their operations), dynIndex finds them, and attached is this
	// rank's own Regions by address and key (dynamic.go).
	dyn      [][]dynEntry
	dynIndex []map[[2]uint64]int
	attached map[[2]uint64]attachment
	// dynShare: every rank of a dynamic window reaches the AttachShared
	// Regions of its node by direct stores (no rank turned shared
	// memory off); oneNode: every rank runs on this node (NodeKey), so
	// that those Regions' atomics are CPU atomics on every rank too;
	// nodeKey is this rank's node; dynMaps are other ranks' shared
	// Regions this rank has mapped, by segment name (dynshared.go).
	dynShare, oneNode bool
	nodeKey           string
	dynMaps           map[string]*nodeseg.Seg
}

// netPath is the libfabric side of a window (fabricpath.go).
type netPath interface {
	put(target int, off int, data []byte) error
	get(target int, off int, dst []byte) error
	putSignal(target int, off int, data []byte, sigOff int, val uint64) error
	accumulate(target int, off int, t AtomicType, o Op, data []byte) error
	fetchOp(target int, off int, t AtomicType, o Op, v uint64) (uint64, error)
	// getAccumulate is accumulate that stores the previous values in
	// result, waited for.
	getAccumulate(target int, off int, t AtomicType, o Op, data, result []byte) error
	cas(target int, off int, t AtomicType, cmp, swap uint64) (uint64, error)
	flush(ctx context.Context, target int) error // target < 0: all
	// flushLocal waits for local completion only (buffers reusable,
	// Gets landed); target < 0: all.
	flushLocal(ctx context.Context, target int) error
	// issued counts operations issued so far; waitIssued(n) returns once
	// the first n are locally complete.
	issued() uint64
	waitIssued(ctx context.Context, n uint64) error
	// issuedDone drives progress once and reports whether the first n
	// are locally complete.
	issuedDone(n uint64) (bool, error)
	progress() error
	// waitWord drives progress until *p ≥ want, for at most spins polls
	// in one call, and reports whether it got there.
	waitWord(p *uint64, want uint64, spins int) (bool, error)
	// ctrlSignal stores val into control word at byte off of target.
	ctrlSignal(target, off int, val uint64) error
	// ctrlCAS compares and swaps the control word at byte off of target
	// and returns its previous value.
	ctrlCAS(target, off int, cmp, swap uint64) (uint64, error)
	// ctrlXor flips bits of the control word at byte off of target,
	// completing at the next flush.
	ctrlXor(target, off int, bits uint64) error
	// ctrlMem is this rank's control words when the path owns them.
	ctrlMem() []byte
	// setCallCtx makes ctx the context that the path's own waits (for
	// room in the provider's queue, for scratch buffers, for a control
	// operation) end with besides the window's timeout, and returns the
	// one before (nil: none).
	setCallCtx(ctx context.Context) (old context.Context)
	// attach registers buf for remote access and returns the address
	// and key other ranks reach it by (dynamic windows).
	attach(buf []byte) (addr, key uint64, mr io.Closer, err error)
	// noCQSignals makes PutSignal write every signal (dynamic windows,
	// whose Regions a signal in CQ data cannot name).
	noCQSignals()
	// typedVec and typedChunks serve PutTyped and GetTyped
	// (fabtyped.go).
	typedVec(target, offset int, segs []ddt.Segment, pieces [][]byte, get bool) error
	typedChunks(ctx context.Context, target, offset int, segs []ddt.Segment, n int,
		pack chunkPack, unpack chunkUnpack) error
	ordering() SignalOrdering
	provider() string
	close() error
}

// newNetPath opens the libfabric path of w collectively; set by
// fabricpath.go. It must perform the same group calls on every rank.
// region is registered as a whole; with ownCtrl the path allocates this
// rank's control words itself (ctrlMem), else they are region's first
// ctrlBytes.
var newNetPath func(ctx context.Context, w *Window, region []byte, ownCtrl bool) (netPath, error)

// Allocate creates a window of size bytes on every rank (sizes may differ
// between ranks; 0 is allowed). It is collective over g. The memory is
// zeroed and lives outside the Go heap; Bytes returns it.
func Allocate(ctx context.Context, g Group, size int, opts ...Option) (*Window, error) {
	if g == nil {
		return nil, fmt.Errorf("onesided: Allocate: nil group: %w", ErrInvalid)
	}
	if size < 0 {
		return nil, fmt.Errorf("onesided: Allocate: size %d: %w", size, ErrInvalid)
	}
	o := resolveOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	w := &Window{g: g, rank: g.Rank(), size: g.Size(), opts: o, log: log}
	w.setProfile()
	w.ctrlLen = ctrlLen(w.size)
	if err := w.setup(ctx, size); err != nil {
		w.release(false)
		return nil, fmt.Errorf("onesided: Allocate(%d bytes) on rank %d: %w", size, w.rank, err)
	}
	return w, nil
}

// Create makes a window of memory the caller already has (MPI_Win_create):
// buf becomes this rank's region. It is collective over g. Such memory
// cannot be shared between processes, so the window always uses the
// libfabric path (WithSharedMemory(ShmOnly) fails with ErrNotSupported).
// buf is registered, which pins it, until Free; it must not be used for
// anything else meanwhile. len(buf) may differ between ranks, and be 0.
func Create(ctx context.Context, g Group, buf []byte, opts ...Option) (*Window, error) {
	return create(ctx, "Create", g, buf, false, opts)
}

// create is Create, and with dynamic CreateDynamic's window (which
// keeps the shared-memory mode for AttachShared's Regions).
func create(ctx context.Context, op string, g Group, buf []byte, dynamic bool, opts []Option) (*Window, error) {
	if g == nil {
		return nil, fmt.Errorf("onesided: %s: nil group: %w", op, ErrInvalid)
	}
	o := resolveOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	if o.shm == ShmOnly {
		return nil, fmt.Errorf("onesided: %s: user memory cannot be a direct-store window: %w", op, ErrNotSupported)
	}
	if len(buf) >= 8 && uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%8 != 0 {
		return nil, fmt.Errorf("onesided: %s: buf is not 8-byte aligned (signal words and atomics need it): %w", op, ErrInvalid)
	}
	share := dynamic && o.shm == ShmAuto
	o.shm = ShmOff
	w := &Window{g: g, rank: g.Rank(), size: g.Size(), opts: o, log: log}
	w.setProfile()
	w.ctrlLen = ctrlLen(w.size)
	err := func() error {
		// Record: size u64 | shares AttachShared memory u8 | process
		// identity (peerwatch) | node key.
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(buf)))
		b = append(b, boolByte(share))
		w.nodeKey = nodeseg.NodeKey()
		all, err := g.Allgather(ctx, append(peerwatch.Self().Append(b), w.nodeKey...))
		if err != nil {
			return fmt.Errorf("exchange sizes: %w", err)
		}
		if len(all) != w.size {
			return fmt.Errorf("allgather returned %d entries for %d ranks: %w", len(all), w.size, ErrInvalid)
		}
		w.sizes = make([]int, w.size)
		ids := make([]peerwatch.Ident, w.size)
		w.dynShare, w.oneNode = share, true
		for r, m := range all {
			if len(m) < 9 {
				return fmt.Errorf("bad size record from rank %d: %w", r, ErrInvalid)
			}
			w.sizes[r] = int(binary.LittleEndian.Uint64(m))
			w.dynShare = w.dynShare && m[8] == 1
			var node []byte
			if ids[r], node, err = peerwatch.Parse(m[9:]); err != nil {
				return fmt.Errorf("bad size record from rank %d: %v: %w", r, err, ErrInvalid)
			}
			w.oneNode = w.oneNode && string(node) == w.nodeKey
		}
		w.watch = peerwatch.New(ids)
		w.oneMachine = oneMachine(ids, w.rank)
		w.peers = make([][]byte, w.size)
		w.ctrl = make([][]byte, w.size)
		w.local = buf[:len(buf):len(buf)]
		region := w.local
		if len(region) == 0 {
			region = make([]byte, 8) // nothing can address it; registration needs bytes
		}
		if newNetPath == nil {
			return fmt.Errorf("the libfabric path is not built in: %w", ErrNoPath)
		}
		if w.net, err = newNetPath(ctx, w, region, true); err != nil {
			return err
		}
		w.myCtrl = w.net.ctrlMem()
		w.atomicsNet = true
		w.peers[w.rank] = w.local
		return nil
	}()
	if err != nil {
		w.release(false)
		return nil, fmt.Errorf("onesided: %s(%d bytes) on rank %d: %w", op, len(buf), w.rank, err)
	}
	return w, nil
}

// oneMachine reports whether every process of ids runs where ids[me]
// does: the same host name, boot id and pid namespace (whatever
// WEFT_NODE_ID says), so that libfabric's shm provider reaches them all.
func oneMachine(ids []peerwatch.Ident, me int) bool {
	for _, id := range ids {
		if id.Node != ids[me].Node {
			return false
		}
	}
	return true
}

func (w *Window) setup(ctx context.Context, size int) error {
	// Round 1: every rank's size, node, process identity and machine:
	// size u64 | node length u16 | node | identity (peerwatch) | machine.
	key, mkey := nodeseg.NodeKey(), nodeseg.MachineKey()
	msg := make([]byte, 10, 64+len(key)+len(mkey))
	binary.LittleEndian.PutUint64(msg, uint64(size))
	binary.LittleEndian.PutUint16(msg[8:], uint16(len(key)))
	msg = append(msg, key...)
	msg = peerwatch.Self().Append(msg)
	msg = append(msg, mkey...)
	all, err := w.g.Allgather(ctx, msg)
	if err != nil {
		return fmt.Errorf("exchange sizes: %w", err)
	}
	if len(all) != w.size {
		return fmt.Errorf("allgather returned %d entries for %d ranks: %w", len(all), w.size, ErrInvalid)
	}
	w.sizes = make([]int, w.size)
	nodes := make([]string, w.size)
	ids := make([]peerwatch.Ident, w.size)
	sameMachine := 0 // ranks sharing this machine's cores
	for r, m := range all {
		if len(m) < 10 || len(m) < 10+int(binary.LittleEndian.Uint16(m[8:])) {
			return fmt.Errorf("short size record from rank %d: %w", r, ErrInvalid)
		}
		w.sizes[r] = int(binary.LittleEndian.Uint64(m))
		n := 10 + int(binary.LittleEndian.Uint16(m[8:]))
		nodes[r] = string(m[10:n])
		id, machine, err := peerwatch.Parse(m[n:])
		if err != nil {
			return fmt.Errorf("size record from rank %d: %v: %w", r, err, ErrInvalid)
		}
		ids[r] = id
		if string(machine) == mkey {
			sameMachine++
		}
	}
	w.watch = peerwatch.New(ids)
	multiNode := false
	var local []int // ranks on my node, ascending
	for r := range nodes {
		if nodes[r] == key {
			local = append(local, r)
		} else {
			multiNode = true
		}
	}
	w.oneMachine = oneMachine(ids, w.rank)
	if w.wait, err = choosePolicy(w.opts.wait, sameMachine); err != nil {
		return err
	}
	if w.opts.shm == ShmOnly && multiNode {
		return fmt.Errorf("direct-store path forced but ranks span several nodes: %w", ErrNoPath)
	}
	needNet := multiNode || w.opts.shm == ShmOff
	w.peers = make([][]byte, w.size)
	w.ctrl = make([][]byte, w.size)

	if w.opts.shm != ShmOff {
		// Round 2: the node leader creates the segment and publishes its name.
		offs := offsOf(local, w.sizes)
		total := offs[len(offs)-1] + regionBytes(w.sizes[local[len(local)-1]], w.size)
		leader := local[0] == w.rank
		var name string
		if leader {
			if w.seg, err = nodeseg.Create("win", total); err != nil {
				return fmt.Errorf("onesided: %w", err)
			}
			name = w.seg.Name()
		}
		names, err := w.g.Allgather(ctx, []byte(name))
		if err != nil {
			return fmt.Errorf("exchange shm names: %w", err)
		}
		if !leader {
			if w.seg, err = nodeseg.Open(string(names[local[0]]), total); err != nil {
				return fmt.Errorf("onesided: %w", err)
			}
		}
		for i, r := range local {
			o := offs[i] + w.ctrlLen
			w.peers[r] = w.seg.Bytes()[o : o+w.sizes[r] : o+w.sizes[r]]
			w.ctrl[r] = w.seg.Bytes()[offs[i]:o:o]
		}
		w.local = w.peers[w.rank]
		w.myCtrl = w.ctrl[w.rank]
	} else {
		if w.anon, err = anonMap(regionBytes(size, w.size)); err != nil {
			return err
		}
		c := w.ctrlLen
		w.myCtrl = w.anon[:c:c]
		w.local = w.anon[c : c+size : c+size]
	}

	// Every rank has mapped the segment once this barrier is passed:
	// remove its name now, before anything else can fail and leave it.
	if err := w.g.Barrier(ctx); err != nil {
		return fmt.Errorf("barrier after mapping: %w", err)
	}
	if w.seg != nil && local[0] == w.rank {
		if err := w.seg.Unlink(); err != nil {
			w.log.Warn("unlink shared segment", "err", err)
		}
	}
	if needNet {
		if newNetPath == nil {
			return fmt.Errorf("ranks need the libfabric path, which is not built in: %w", ErrNoPath)
		}
		// Register the whole page-rounded region of this rank.
		var region []byte
		if w.seg != nil {
			i := indexOf(local, w.rank)
			off := offsOf(local, w.sizes)[i]
			region = w.seg.Bytes()[off : off+regionBytes(size, w.size)]
		} else {
			region = w.anon
		}
		w.netOff = w.ctrlLen
		if w.net, err = newNetPath(ctx, w, region, false); err != nil {
			return err
		}
		w.atomicsNet = true
		if w.opts.shm == ShmOff {
			for r := range w.peers {
				w.peers[r] = nil
				w.ctrl[r] = nil
			}
		}
		// This rank's own region is always reached by plain copies
		// (atomics still go through libfabric: atomicsNet).
		w.peers[w.rank] = w.local
	}
	w.log.Debug("window allocated", "rank", w.rank, "size", size, "shm", w.opts.shm,
		"net", w.net != nil, "local_ranks", len(local), "wait", w.wait.Name)
	return nil
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func offsOf(local []int, sizes []int) []int {
	offs := make([]int, len(local))
	total := 0
	for i, r := range local {
		offs[i] = total
		total += regionBytes(sizes[r], len(sizes))
	}
	return offs
}

// release frees everything the window holds (no collective calls).
// synced says that every rank is past its last operation on the window
// (Free's synchronisation succeeded). Without it the libfabric path and
// the memory it registered are parked until the window's other ranks in
// this process have released theirs (procpeers.go), since they may still
// be inside an operation that touches this rank's endpoint.
func (w *Window) release(synced bool) {
	net, seg, anon, peers, lg := w.net, w.seg, w.anon, w.procPeers, w.log
	attached, maps := w.attached, w.dynMaps
	w.net, w.seg, w.anon, w.procPeers, w.attached, w.dynMaps = nil, nil, nil, nil, nil, nil
	w.local = nil
	w.peers = nil
	if seg != nil {
		_ = seg.Unlink() // the name only; the mapping goes with the rest
	}
	free := func() {
		for _, a := range attached {
			_ = a.mr.Close()
		}
		if net != nil {
			if err := net.close(); err != nil {
				lg.Warn("close libfabric path", "err", err)
			}
		}
		for _, a := range attached {
			a.free()
		}
		closeDynMaps(maps)
		if seg != nil {
			_ = seg.Close()
		}
		if anon != nil {
			_ = syscallMunmap(anon)
		}
	}
	switch {
	case peers == nil:
		free()
	case synced:
		free()
		peers.leave(w.rank, nil)
	default:
		peers.leave(w.rank, free)
	}
}

// Free completes all outstanding operations, waits for every rank and
// releases the window. It is collective. Calling Free again returns nil.
//
// If ctx is already done, Free does not wait for the other ranks: it
// releases the window at once and returns ctx's error (wrapped), so that a
// rank that gave up (or whose job is being torn down) can always free its
// windows. If the synchronisation fails (ctx ends while waiting, a rank
// never arrives), Free also releases the window and returns the error.
// After such an unsynchronised Free, the libfabric endpoint and the
// registered memory of this rank stay open until every rank of the window
// in this process has freed the window too: an in-process rank may still
// be inside an operation on them, and closing them under it would crash
// the process (libfabric's shm provider shares the endpoint's mapping
// within a process). The memory of Create's buf may be written by such
// ranks until then.
func (w *Window) Free(ctx context.Context) error {
	defer w.after(w.during(ctx))
	if w == nil {
		return fmt.Errorf("onesided: Free of a nil window: %w", ErrInvalid)
	}
	if w.closed {
		return nil
	}
	w.drainWaiters()
	if err := ctx.Err(); err != nil {
		w.closed = true
		w.release(false)
		return fmt.Errorf("onesided: Free on rank %d without waiting for the other ranks: %w", w.rank, err)
	}
	err := w.Fence(ctx)
	if err == nil && w.net != nil {
		// A provider may still touch a peer's endpoint after the peer saw
		// our last signal (shm reads its response queue): close only
		// once every rank is past the fence.
		err = w.g.Barrier(ctx)
	}
	w.closed = true
	w.release(err == nil)
	if err != nil {
		return fmt.Errorf("onesided: Free: %w", err)
	}
	return nil
}

// drainWaiters makes goroutines waiting in WaitSignal or TestSignal on w
// return ErrClosed, and returns once none is left inside.
func (w *Window) drainWaiters() {
	w.freeing.Store(true)
	for i := 0; w.waiters.Load() > 0; i++ {
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// enterWait registers a goroutine about to read the window in WaitSignal
// or TestSignal; a nil error must be paired with exitWait.
func (w *Window) enterWait(op string) error {
	if w == nil {
		return fmt.Errorf("onesided: %s on a nil window: %w", op, ErrInvalid)
	}
	w.waiters.Add(1)
	if w.freeing.Load() {
		w.waiters.Add(-1)
		return fmt.Errorf("onesided: %s: %w", op, ErrClosed)
	}
	return nil
}

func (w *Window) exitWait() { w.waiters.Add(-1) }

// Rank is this process's rank in the window's group (-1 for a nil
// window).
func (w *Window) Rank() int {
	if w == nil {
		return -1
	}
	return w.rank
}

// Size is the number of ranks in the window's group.
func (w *Window) Size() int {
	if w == nil {
		return 0
	}
	return w.size
}

// Len returns the size in bytes of rank's region.
func (w *Window) Len(rank int) int {
	if w == nil || rank < 0 || rank >= len(w.sizes) {
		return 0
	}
	return w.sizes[rank]
}

// Bytes returns this rank's region. Other ranks may write it at any time;
// read signal words with WaitSignal/TestSignal (or sync/atomic), and data
// only after a signal or a Fence says it is there.
func (w *Window) Bytes() []byte {
	if w == nil {
		return nil
	}
	return w.local
}

// Direct reports whether operations on target are direct stores through
// shared memory (true) or go through libfabric (false).
func (w *Window) Direct(target int) bool {
	return w != nil && target >= 0 && target < len(w.peers) && w.peers[target] != nil
}

// Shared returns target's region as this process maps it, for loads and
// stores of its own (MPI_Win_shared_query): ranks of this node whose
// regions share one memory segment with this rank's, and this rank
// itself. For any other target (Direct false: another node, or a window
// without shared memory) it fails with ErrNotSupported. The slice is
// valid until Free. A store through it is a direct-store Put that is
// visible at once: the target reads it, as any data other ranks write,
// after a signal or a Fence says it is there; words that ranks update
// concurrently take sync/atomic.
func (w *Window) Shared(target int) ([]byte, error) {
	if err := w.check("Shared", target, 0, 0); err != nil {
		return nil, err
	}
	p := w.peers[target]
	if p == nil {
		return nil, fmt.Errorf("onesided: Shared: rank %d's region is not mapped by this process (another node, or no shared memory): %w", target, ErrNotSupported)
	}
	return p, nil
}

// Provider names the libfabric provider the window uses, or "" when every
// target is reached by direct stores.
func (w *Window) Provider() string {
	if w == nil || w.net == nil {
		return ""
	}
	return w.net.provider()
}

// Ordering reports the signal ordering the libfabric path uses (OrderAuto
// when the window has no libfabric path).
func (w *Window) Ordering() SignalOrdering {
	if w == nil || w.net == nil {
		return OrderAuto
	}
	return w.net.ordering()
}

func (w *Window) check(op string, target, off, n int) error {
	if w == nil {
		return fmt.Errorf("onesided: %s on a nil window: %w", op, ErrInvalid)
	}
	if w.closed {
		return fmt.Errorf("onesided: %s: %w", op, ErrClosed)
	}
	if target < 0 || target >= w.size {
		return fmt.Errorf("onesided: %s: target %d of %d ranks: %w", op, target, w.size, ErrUnknownRank)
	}
	if off < 0 || n < 0 || off > w.sizes[target] || n > w.sizes[target]-off {
		return fmt.Errorf("onesided: %s: [%d, %d) outside rank %d's %d bytes: %w",
			op, off, off+n, target, w.sizes[target], ErrOutOfRange)
	}
	return nil
}

func (w *Window) checkAligned(op string, target, off, n, align int) error {
	if err := w.check(op, target, off, n); err != nil {
		return err
	}
	if off%align != 0 {
		return fmt.Errorf("onesided: %s: offset %d not %d-byte aligned: %w", op, off, align, ErrInvalid)
	}
	return nil
}

// Put copies data into target's region at offset. The write is visible at
// the target after Flush(target), FlushAll or Fence (direct-store writes at
// once). As with MPI_Put, data must not be modified until that flush:
// the libfabric path may read it in place (it is copied at once only for
// direct stores and for puts of at most 256 bytes).
func (w *Window) Put(target, offset int, data []byte) error {
	if err := w.check("Put", target, offset, len(data)); err != nil {
		return err
	}
	w.count(opPut, target, len(data))
	if p := w.peers[target]; p != nil {
		copy(p[offset:], data)
		return nil
	}
	return w.net.put(target, offset+w.netOff, data)
}

// Get copies len(dst) bytes from target's region at offset into dst. dst
// holds the data after Flush(target), FlushAll or Fence (at once for direct
// stores). dst must not be touched until then.
func (w *Window) Get(target, offset int, dst []byte) error {
	if err := w.check("Get", target, offset, len(dst)); err != nil {
		return err
	}
	w.count(opGet, target, len(dst))
	if p := w.peers[target]; p != nil {
		memcopy.Copy(dst, p[offset:])
		return nil
	}
	return w.net.get(target, offset+w.netOff, dst)
}

// PutSignal copies data into target's region at offset and then stores
// value into the 8-byte signal word at signalOffset of target's region. A
// process that observes the value in the signal word (WaitSignal,
// TestSignal) also observes the data. signalOffset must be 8-byte aligned
// and must not overlap the data. As with Put, data must not be modified
// until the put is complete: a flush, or the target's acknowledgement that
// it saw the signal.
//
// With the delivery ordering (see SignalOrdering) the signal write is
// issued only once the data's delivery completion has arrived, by whichever
// later call on the window drives progress (WaitSignal, TestSignal, Flush,
// Fence, further operations): a rank that must not stall its peers calls
// Flush(target) before going quiet. Signals to one target are written in
// the order they were asked for. With OrderCQData the target stores the
// signal itself when it next reads its completion queue (any call on its
// window that drives progress, and every Fence); write signal words only
// with PutSignal and Signal then (a later Put or atomic to the word from
// the same origin may land before the signal).
func (w *Window) PutSignal(target, offset int, data []byte, signalOffset int, value uint64) error {
	if err := w.check("PutSignal", target, offset, len(data)); err != nil {
		return err
	}
	if err := w.checkAligned("PutSignal", target, signalOffset, 8, 8); err != nil {
		return err
	}
	if signalOffset < offset+len(data) && offset < signalOffset+8 && len(data) > 0 {
		return fmt.Errorf("onesided: PutSignal: signal [%d,+8) overlaps data [%d,%d): %w",
			signalOffset, offset, offset+len(data), ErrInvalid)
	}
	w.count(opSignal, target, len(data)+8)
	if p := w.peers[target]; p != nil {
		copy(p[offset:], data)
		// A sequentially consistent store: every earlier store of this
		// thread is visible to a process that loads this value.
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&p[signalOffset])), value)
		return nil
	}
	return w.net.putSignal(target, offset+w.netOff, data, signalOffset+w.netOff, value)
}

// Signal stores value into the signal word at signalOffset of target's
// region, ordered after every PutSignal this rank issued before to target.
func (w *Window) Signal(target, signalOffset int, value uint64) error {
	return w.PutSignal(target, 0, nil, signalOffset, value)
}

// TestSignal reads this rank's signal word at signalOffset and reports
// whether cmp(word, value) holds. It drives libfabric progress once.
func (w *Window) TestSignal(signalOffset int, cmp Cmp, value uint64) (bool, uint64, error) {
	if err := w.enterWait("TestSignal"); err != nil {
		return false, 0, err
	}
	defer w.exitWait()
	if err := w.checkAligned("TestSignal", w.rank, signalOffset, 8, 8); err != nil {
		return false, 0, err
	}
	if !cmp.valid() {
		return false, 0, fmt.Errorf("onesided: TestSignal: comparison %d: %w", cmp, ErrInvalid)
	}
	return w.testWord((*uint64)(unsafe.Pointer(&w.local[signalOffset])), cmp, value)
}

// testWord is TestSignal on the word at p (this rank's memory).
func (w *Window) testWord(p *uint64, cmp Cmp, value uint64) (bool, uint64, error) {
	v := atomic.LoadUint64(p)
	if cmp.test(v, value) {
		return true, v, nil
	}
	if w.net != nil {
		if err := w.net.progress(); err != nil {
			return false, v, err
		}
		v = atomic.LoadUint64(p)
	}
	return cmp.test(v, value), v, nil
}

// WaitSignal waits until cmp(word, value) holds for this rank's signal word
// at signalOffset, driving libfabric progress meanwhile, and returns the
// word. It returns ctx.Err() (wrapped) if ctx ends first.
func (w *Window) WaitSignal(ctx context.Context, signalOffset int, cmp Cmp, value uint64) (uint64, error) {
	if err := w.enterWait("WaitSignal"); err != nil {
		return 0, err
	}
	defer w.exitWait()
	if err := w.checkAligned("WaitSignal", w.rank, signalOffset, 8, 8); err != nil {
		return 0, err
	}
	if !cmp.valid() {
		return 0, fmt.Errorf("onesided: WaitSignal: comparison %d: %w", cmp, ErrInvalid)
	}
	return w.waitWordCmp(ctx, "WaitSignal", (*uint64)(unsafe.Pointer(&w.local[signalOffset])), signalOffset, cmp, value)
}

// waitWordCmp is WaitSignal (op, for errors) on the word at p (this
// rank's memory, at offset off of its region or Region).
func (w *Window) waitWordCmp(ctx context.Context, op string, p *uint64, off int, cmp Cmp, value uint64) (uint64, error) {
	if cmp == CmpGE {
		if err := w.waitGE(ctx, p, value, &w.freeing); err != nil {
			return atomic.LoadUint64(p), fmt.Errorf("onesided: %s(offset %d, %d): %w", op, off, value, err)
		}
		return atomic.LoadUint64(p), nil
	}
	wt := w.newWaiter(0)
	wt.stop = &w.freeing
	for {
		v := atomic.LoadUint64(p)
		if cmp.test(v, value) {
			return v, nil
		}
		if w.net != nil {
			if err := w.net.progress(); err != nil {
				return v, fmt.Errorf("onesided: %s: %w", op, err)
			}
		}
		if err := wt.pause(ctx); err != nil {
			return v, fmt.Errorf("onesided: %s(offset %d, %d): %w", op, off, value, err)
		}
	}
}

// waitSpins is how many polls one cgo call makes while a waiter spins: a
// few microseconds, so that the waiter's clock and ctx are still looked at
// often.
const waitSpins = 32

// waitGE waits until the word at p (this rank's memory) is at least want,
// or until *stop (when not nil) is set.
// With a libfabric path every poll also drives progress, inside fabric's
// CQ.WaitWord: one cgo call per waitSpins polls while spinning, one per
// poll afterwards.
func (w *Window) waitGE(ctx context.Context, p *uint64, want uint64, stop *atomic.Bool) error {
	if atomic.LoadUint64(p) >= want {
		return nil
	}
	wt := w.newWaiter(0)
	wt.stop = stop
	for {
		if w.net != nil {
			spins := 1
			if wt.spinning() {
				spins = waitSpins
			}
			ok, err := w.net.waitWord(p, want, spins)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
		} else if atomic.LoadUint64(p) >= want {
			return nil
		}
		if err := wt.pause(ctx); err != nil {
			return err
		}
	}
}

// Accumulate combines data, a sequence of elements of type t, into target's
// region at offset with op: each element is updated atomically. The update
// is complete at the target after a flush. offset must be aligned to
// t.Size(). OpNoOp is not allowed.
func (w *Window) Accumulate(target, offset int, t AtomicType, op Op, data []byte) error {
	if err := checkOp(t, op); err != nil || op == OpNoOp {
		return fmt.Errorf("onesided: Accumulate(%v, %v): %w", op, t, ErrInvalid)
	}
	sz := t.Size()
	if len(data)%sz != 0 {
		return fmt.Errorf("onesided: Accumulate: %d bytes is not a whole number of %v: %w", len(data), t, ErrInvalid)
	}
	if err := w.checkAligned("Accumulate", target, offset, len(data), sz); err != nil {
		return err
	}
	w.count(opAtomic, target, len(data))
	return w.accumulate(target, offset, t, op, data)
}

// accumulate is Accumulate once checked (and counted).
func (w *Window) accumulate(target, offset int, t AtomicType, op Op, data []byte) error {
	if p := w.peers[target]; p != nil && !w.atomicsNet {
		applyAll(p[offset:], t, op, data)
		return nil
	}
	return w.net.accumulate(target, offset+w.netOff, t, op, data)
}

// applyAll applies op with each element of data to the elements of mem
// from its start, each a CPU atomic.
func applyAll(mem []byte, t AtomicType, op Op, data []byte) {
	sz := t.Size()
	for i := 0; i < len(data); i += sz {
		atomicApply(unsafe.Pointer(&mem[i]), t, op, loadElem(data[i:], sz))
	}
}

// GetAccumulate applies op element by element with data to consecutive
// elements of type t from offset in target's region, as Accumulate does,
// and returns their previous values in result (MPI_Get_accumulate): each
// element's read and update are one atomic step with respect to every
// other atomic operation on it (the elements are not one atomic unit
// together). OpNoOp only reads (data is then ignored but for its
// length) and OpReplace swaps. len(result) must equal len(data). It
// waits for the results. Through libfabric the elements go in fetching
// atomics of up to 128 bytes each, several in flight at once.
func (w *Window) GetAccumulate(target, offset int, t AtomicType, op Op, data, result []byte) error {
	if err := checkOp(t, op); err != nil {
		return fmt.Errorf("onesided: GetAccumulate(%v, %v): %w", op, t, err)
	}
	sz := t.Size()
	if len(data)%sz != 0 || len(result) != len(data) {
		return fmt.Errorf("onesided: GetAccumulate: %d bytes of data and %d of result for elements of %v: %w", len(data), len(result), t, ErrInvalid)
	}
	if err := w.checkAligned("GetAccumulate", target, offset, len(data), sz); err != nil {
		return err
	}
	w.count(opAtomic, target, len(data))
	if p := w.peers[target]; p != nil && !w.atomicsNet {
		for i := 0; i < len(data); i += sz {
			storeElem(result[i:], sz, atomicApply(unsafe.Pointer(&p[offset+i]), t, op, loadElem(data[i:], sz)))
		}
		return nil
	}
	if err := w.net.getAccumulate(target, offset+w.netOff, t, op, data, result); err != nil {
		return fmt.Errorf("onesided: GetAccumulate: %w", err)
	}
	return nil
}

// FetchAndOp atomically applies op with operand to the element of type t
// at offset in target's region and returns the element's previous value
// (as raw bits: use math.Float64frombits and friends for floats, and
// int64(v) / int32(uint32(v)) for signed types). It waits for the result.
func (w *Window) FetchAndOp(target, offset int, t AtomicType, op Op, operand uint64) (uint64, error) {
	if err := checkOp(t, op); err != nil {
		return 0, fmt.Errorf("onesided: FetchAndOp: %w", err)
	}
	if err := w.checkAligned("FetchAndOp", target, offset, t.Size(), t.Size()); err != nil {
		return 0, err
	}
	w.count(opAtomic, target, t.Size())
	if p := w.peers[target]; p != nil && !w.atomicsNet {
		return atomicApply(unsafe.Pointer(&p[offset]), t, op, operand), nil
	}
	return w.net.fetchOp(target, offset+w.netOff, t, op, operand)
}

// CompareAndSwap atomically replaces the element of type t at offset in
// target's region with swap if it equals compare, and returns the previous
// value. It waits for the result. Floats compare bitwise.
func (w *Window) CompareAndSwap(target, offset int, t AtomicType, compare, swap uint64) (uint64, error) {
	if t.Size() == 0 {
		return 0, fmt.Errorf("onesided: CompareAndSwap: type %v: %w", t, ErrInvalid)
	}
	if err := w.checkAligned("CompareAndSwap", target, offset, t.Size(), t.Size()); err != nil {
		return 0, err
	}
	w.count(opAtomic, target, t.Size())
	if p := w.peers[target]; p != nil && !w.atomicsNet {
		return atomicCAS(unsafe.Pointer(&p[offset]), t, compare, swap), nil
	}
	return w.net.cas(target, offset+w.netOff, t, compare, swap)
}

// during makes ctx the context of the network path's own waits for the
// call in progress (netPath.setCallCtx) and returns the one before, for
// after: defer w.after(w.during(ctx)) (no closure: calls stay free of
// allocations).
func (w *Window) during(ctx context.Context) (old context.Context) {
	if w == nil || w.net == nil {
		return nil
	}
	return w.net.setCallCtx(ctx)
}

// after restores the context during replaced.
func (w *Window) after(old context.Context) {
	if w != nil && w.net != nil {
		w.net.setCallCtx(old)
	}
}

// Flush waits until every operation this rank issued to target is complete
// at the target (remote completion), and every Get to target has landed.
func (w *Window) Flush(ctx context.Context, target int) error {
	if err := w.check("Flush", target, 0, 0); err != nil {
		return err
	}
	if w.net == nil {
		return nil
	}
	return w.net.flush(ctx, target)
}

// FlushAll is Flush for every target.
func (w *Window) FlushAll(ctx context.Context) error {
	if w == nil {
		return fmt.Errorf("onesided: FlushAll on a nil window: %w", ErrInvalid)
	}
	if w.closed {
		return fmt.Errorf("onesided: FlushAll: %w", ErrClosed)
	}
	if w.net == nil {
		return nil
	}
	return w.net.flush(ctx, -1)
}

// FlushLocal waits until every operation this rank issued to target is
// complete at this rank (MPI_Win_flush_local): the sources of its Puts
// and Accumulates may be reused and its Gets have landed, though its
// writes may not yet be visible at the target. It is cheaper than Flush
// where the provider needs a marker for remote completion.
func (w *Window) FlushLocal(ctx context.Context, target int) error {
	if err := w.check("FlushLocal", target, 0, 0); err != nil {
		return err
	}
	if w.net == nil {
		return nil
	}
	return w.net.flushLocal(ctx, target)
}

// FlushLocalAll is FlushLocal for every target (MPI_Win_flush_local_all).
func (w *Window) FlushLocalAll(ctx context.Context) error {
	if err := w.check("FlushLocalAll", 0, 0, 0); err != nil {
		return err
	}
	if w.net == nil {
		return nil
	}
	return w.net.flushLocal(ctx, -1)
}

// Fence completes this rank's operations (FlushAll) and waits for every
// rank to do the same: afterwards every rank sees every write issued
// before the Fence. It is collective and drives progress while it waits.
func (w *Window) Fence(ctx context.Context) error {
	defer w.after(w.during(ctx))
	if err := w.FlushAll(ctx); err != nil {
		return err
	}
	return w.barrier(ctx)
}

// barrier is a dissemination barrier over the window's own control words:
// in round k each rank stores the barrier's epoch into word k of rank
// (me + 2^k) mod P and waits for its own word k to reach the epoch. Epochs
// only grow, so the words never need resetting. It costs log2(P) signal
// latencies instead of a trip through the group.
func (w *Window) barrier(ctx context.Context) error {
	w.epoch++
	e := w.epoch
	for k, dist := 0, 1; dist < w.size; k, dist = k+1, dist*2 {
		to := (w.rank + dist) % w.size
		if c := w.ctrl[to]; c != nil {
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&c[8*k])), e)
		} else {
			if err := w.net.ctrlSignal(to, 8*k, e); err != nil {
				return fmt.Errorf("onesided: barrier: %w", err)
			}
		}
		p := (*uint64)(unsafe.Pointer(&w.myCtrl[8*k]))
		if err := w.waitGE(ctx, p, e, nil); err != nil {
			return fmt.Errorf("onesided: barrier (epoch %d, round %d): %w", e, k, err)
		}
	}
	if w.net != nil {
		// Every signal sent to this rank before the peers entered the
		// barrier has been delivered by now; with OrderCQData it is stored
		// when the completion queue is read, and a waiter may have seen
		// its barrier word before reading all of it: read it once more.
		if err := w.net.progress(); err != nil {
			return fmt.Errorf("onesided: barrier: %w", err)
		}
		// Our last signals must be delivered before anyone may free.
		return w.net.flush(ctx, -1)
	}
	return nil
}

// ctrlBytes of fixed control words begin each rank's control words: one
// barrier word per dissemination round (up to 62 rounds), the lock word
// and a spare. The bitmaps of post and complete follow (pscw.go).
const ctrlBytes = 512

// ctrlLen is the length of each rank's control words in a window of n
// ranks: the fixed words and two bitmaps of n bits, rounded to a cache
// line so that the region after them starts on one.
func ctrlLen(n int) int { return ctrlBytes + roundUp(2*8*((n+63)/64), 64) }

// regionBytes is the page-rounded size of a rank's region with its
// control words, in a window of n ranks.
func regionBytes(size, n int) int { return roundUp(ctrlLen(n)+max(size, 8), pageSize) }
