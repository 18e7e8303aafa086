package endpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/peerwatch"
	"github.com/weft-hpc/weft/internal/wlog"
	"github.com/weft-hpc/weft/job"
)

// Undefined is the color that makes Split return a nil communicator, and
// the rank Group.Rank and Group.TranslateRanks give for a rank a group
// lacks.
const Undefined = -1

// World is this process's membership in a job: its job.Job, the libfabric
// fabric and domain chosen for it, and the world communicator.
type World struct {
	cfg    config
	bs     job.Job
	ownBS  bool
	info   *fabric.Info
	fab    *fabric.Fabric
	dom    *fabric.Domain
	comm   *Comm
	log    hclog.Logger
	hosts  []string // host name per world rank
	closed bool
	// watch tells blocked waits whether a world rank's process (on this
	// node) has exited (internal/peerwatch).
	watch *peerwatch.Watch
	ids   []peerwatch.Ident // process identity per world rank

	mu      sync.Mutex
	ctxUsed [maxContexts / 64]uint64 // bit i set: context id i is in use in this process
	ctxRefs map[int]int
	ctxHeld map[int]ctxKey // ids reserved by creations still verifying them (ctxid.go)
	ctxQuar []int          // freed ids in quarantine (ctxid.go), oldest first
	// ctxFreed: bit i set, context id i is in ctxQuar: still used in
	// this process's mask, its late messages dropped on arrival. Read
	// without mu by the endpoints' progress.
	ctxFreed ctxBitmap
	privInfo *fabric.Info // ThreadDomain variant of info, for private endpoints
	privFab  *fabric.Fabric
	vcis     []*vci          // endpoint vcis, closed by Close
	sets     map[int]*vciSet // by context id: a communicator's endpoints in this process (peerset.go)
	epCalls  uint32          // CreateEndpoints calls made by this process (endpoint identities)

	statsMu sync.Mutex             // guards sentAll and layers (taken under an endpoint's lock: never the other way)
	sentAll []*sentStats           // every endpoint's send counters, kept after it closes (stats.go)
	layers  map[string]Snapshotter // sections of the stats file from layers above (StatsSection)
}

// Comm is a communicator handle: a group of ranks, this handle's rank in it,
// and a context id that keeps its messages apart from every other
// communicator's. A Comm returned by CreateEndpoints (or derived from one)
// is one endpoint: it must be driven by one goroutine at a time (unless the
// endpoints were created Shared). Comm methods are not safe for concurrent
// use on the same handle in private mode.
type Comm struct {
	w      *World
	v      *vci
	id     int    // context id
	ctx    uint16 // match context for point-to-point (ctxPerID*id)
	rank   int
	size   int
	addrs  []fabric.Addr // comm rank → address in v.av
	slots  []uint8       // comm rank → destination slot (shared endpoints)
	mySlot uint8
	hosts  []int32 // comm rank → host index (into w.hosts)
	world  []int32 // comm rank → world rank (its process, for w.watch)
	// ids maps comm rank → the rank's identity, the same in every
	// communicator that contains it (group.go).
	ids   []uint64
	lrank int
	lsize int
	// links maps comm rank → member of the endpoint's node group it talks
	// to through the node transport (node.go), -1 for libfabric; nil when
	// no peer uses the node transport.
	links []int32
	// inter is set on an intercommunicator (intercomm.go).
	inter *interInfo
	freed atomic.Bool // Free'd (or, for the world communicator, World.Close)
	// scratch is the Request blocking Recv reuses (nil while one is in use
	// or was abandoned in flight); taken and returned under v.lock.
	scratch *Request
}

func (c *Comm) collCtx() uint16 { return c.ctx + 1 }

// partCtx is the match context of partitioned handshakes, partDataCtx
// that of their partitions (partitioned.go).
func (c *Comm) partCtx() uint16     { return c.ctx + 2 }
func (c *Comm) partDataCtx() uint16 { return c.ctx + 3 }

// Init joins the job: it calls job.Init (PMI-1, PMI-2 or singleton),
// opens this rank's endpoint and exchanges addresses with every rank,
// choosing per peer the node transport or libfabric (see Comm.Transport).
// libfabric is opened, and a provider selected (fabric.Select: shm when
// all ranks share a node; WEFT_PROVIDER or WithProvider override), only
// when some peer needs it. ctx bounds the exchange.
func Init(ctx context.Context, opts ...Option) (*World, error) {
	cfg, err := envConfig()
	if err != nil {
		return nil, err
	}
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	w := &World{cfg: cfg, log: wlog.Named("endpoint"), ctxRefs: map[int]int{}, ctxHeld: map[int]ctxKey{}}
	w.bs = cfg.job
	if w.bs == nil {
		if w.bs, err = job.Init(ctx); err != nil {
			return nil, fmt.Errorf("endpoint: job: %w", err)
		}
		w.ownBS = true
	}
	if err := w.open(ctx); err != nil {
		w.closeAll()
		return nil, err
	}
	return w, nil
}

func (w *World) hints(threading fabric.Threading) *fabric.Hints {
	return &fabric.Hints{
		Provider:  w.cfg.provider,
		EPType:    fabric.EPRDM,
		Caps:      fabric.CapTagged | fabric.CapMsg | fabric.CapRMA | fabric.CapRead | fabric.CapWrite | fabric.CapRemoteRead | fabric.CapRemoteWrite | fabric.CapRemoteCQData | w.cfg.extraCaps,
		Threading: threading,
		MsgOrder:  fabric.OrderSAS | w.cfg.order,
	}
}

func (w *World) open(ctx context.Context) error {
	bs := w.bs
	size, rank := bs.Size(), bs.Rank()
	if size > MaxRanks {
		return fmt.Errorf("endpoint: %d ranks exceed the tag layout's %d: %w", size, MaxRanks, ErrInvalid)
	}
	// libfabric is opened only when some peer needs it. A job whose ranks
	// all share this node and can use the node transport never opens it
	// (Comm.Domain and Info open it on demand); otherwise it is opened now,
	// or after the exchange below when the records show a peer needs it.
	v := newVCI(w, &w.cfg, true)
	if !w.cfg.native || bs.LocalSize() != size || (bs.LocalSize() > 1 && !cmaUsable()) {
		if err := w.attachWorldFabric(v); err != nil {
			v.release()
			return err
		}
	}
	var err error
	host := nodeseg.NodeKey()
	var ni nodeInfo
	if w.cfg.native {
		if ni, err = v.openNodeSeg(max(bs.LocalSize(), 1)); err != nil {
			w.log.Warn("node transport off for this rank", "err", err)
			ni = nodeInfo{}
		}
	}
	// Record: eager limit u32 (bit 31: epmatchhdr forced) | node length
	// u32 | node key | process identity (peerwatch) | node transport
	// (node.go) | endpoint name.
	val := make([]byte, 0, 128+len(host)+len(v.name))
	val = binary.LittleEndian.AppendUint32(val, uint32(w.cfg.eagerLimit)|hdrFlag())
	val = binary.LittleEndian.AppendUint32(val, uint32(len(host)))
	val = append(val, host...)
	val = peerwatch.Self().Append(val)
	val = ni.append(val)
	val = append(val, w.tagName(v.name)...)
	if err := bs.Put(fmt.Sprintf("weft.ep.%d", rank), val); err != nil {
		v.release()
		return fmt.Errorf("endpoint: publish address: %w", err)
	}
	if err := bs.Fence(ctx); err != nil {
		v.release()
		return fmt.Errorf("endpoint: address exchange fence: %w", err)
	}
	names := make([][]byte, size)
	var name []byte
	w.hosts = make([]string, size)
	hostIdx := make([]int32, size)
	ids := make([]peerwatch.Ident, size)
	worldRanks := make([]int32, size)
	seen := map[string]int32{}
	nodes := make([]nodeInfo, size)
	for r := 0; r < size; r++ {
		b, err := bs.Get(ctx, fmt.Sprintf("weft.ep.%d", r))
		if err != nil {
			v.release()
			return fmt.Errorf("endpoint: address of rank %d: %w", r, err)
		}
		if len(b) < 8 || int(binary.LittleEndian.Uint32(b[4:])) > len(b)-8 {
			v.release()
			return fmt.Errorf("endpoint: malformed address record of rank %d (%d bytes): %w", r, len(b), ErrInvalid)
		}
		if f := binary.LittleEndian.Uint32(b) & recHdrFlag; f != hdrFlag() {
			v.release()
			return fmt.Errorf("endpoint: rank %d has WEFT_TUNE's epmatchhdr %v, this rank (%d) %v (set WEFT_TUNE alike everywhere): %w", r, f != 0, rank, forceMatchHdr, ErrInvalid)
		}
		if el := int(binary.LittleEndian.Uint32(b) &^ recHdrFlag); el != w.cfg.eagerLimit {
			v.release()
			return fmt.Errorf("endpoint: rank %d uses eager limit %d, this rank %d (set %s alike everywhere): %w", r, el, w.cfg.eagerLimit, EnvEagerLimit, ErrInvalid)
		}
		b = b[4:]
		hl := int(binary.LittleEndian.Uint32(b))
		h := string(b[4 : 4+hl])
		id, rest, err := peerwatch.Parse(b[4+hl:])
		if err != nil {
			v.release()
			return fmt.Errorf("endpoint: address record of rank %d: %v: %w", r, err, ErrInvalid)
		}
		nodes[r], name, err = parseNodeInfo(rest)
		if err != nil {
			v.release()
			return fmt.Errorf("endpoint: address record of rank %d: %v: %w", r, err, ErrInvalid)
		}
		ids[r], worldRanks[r] = id, int32(r)
		names[r] = name
		w.hosts[r] = h
		if _, ok := seen[h]; !ok {
			seen[h] = int32(len(seen))
		}
		hostIdx[r] = seen[h]
	}
	// The world endpoint is shared by the process's goroutines (it is the
	// communicator Init returns, and collectives/onesided use it): locked.
	w.watch = peerwatch.New(ids)
	w.ids = ids
	w.comm = &Comm{w: w, v: v, id: 0, ctx: 0, rank: rank, size: size,
		slots: make([]uint8, size), hosts: hostIdx, world: worldRanks, ids: make([]uint64, size)}
	for r := range w.comm.ids {
		w.comm.ids[r] = uint64(r)
	}
	w.comm.setLocal()
	if err := w.connectWorld(v, nodes, ids); err != nil {
		v.release()
		return err
	}
	if v.noNet {
		w.comm.addrs = make([]fabric.Addr, size) // never used: every peer is on the node transport
	} else {
		if slices.ContainsFunc(names, func(b []byte) bool { return len(b) == 0 }) {
			// Some rank guessed it would not need libfabric: every rank
			// (they all see the same records) opens it and trades names again.
			if v.ep == nil {
				if err := w.attachWorldFabric(v); err != nil {
					v.release()
					return err
				}
			}
			if names, err = w.exchange(ctx, "weft.ep2", w.tagName(v.name)); err != nil {
				v.release()
				return err
			}
		}
		if err := w.checkNames(names, ids); err != nil {
			v.release()
			return err
		}
		addrs, err := v.av.Insert(names...)
		if err != nil {
			v.release()
			return fmt.Errorf("endpoint: insert %d addresses: %w", size, err)
		}
		w.comm.addrs = addrs
	}
	w.ctxUsed[0] |= 1
	w.ctxRefs[0] = 1
	prov := "none (node transport only)"
	if w.info != nil {
		prov = w.info.Provider
	}
	w.log.Debug("world up", "rank", rank, "size", size, "provider", prov, "match_header", w.comm.v.hdr)
	return nil
}

// ensureFabric opens the world's libfabric fabric and domain (provider
// selection included) if they are not open yet. Caller holds w.mu (or is
// Init, before anyone else can reach w).
func (w *World) ensureFabric() error {
	if w.dom != nil {
		return nil
	}
	return w.selectFabric(nil)
}

// selectFabric selects a provider (fabric.SelectOpen: the candidates in
// order, the next one when a candidate's fabric, domain or, with attach,
// endpoint cannot be opened) and keeps its fabric and domain. Caller holds
// w.mu or is Init.
func (w *World) selectFabric(attach func(*fabric.Info, *fabric.Domain) error) error {
	size := w.bs.Size()
	h := w.hints(fabric.ThreadSafe)
	h.JobSize = size
	_, err := fabric.SelectOpen(h, w.bs.LocalSize() == size, func(info *fabric.Info) error {
		if !info.MsgOrder.Has(fabric.OrderSAS) {
			return fmt.Errorf("endpoint: provider %s does not order sends (FI_ORDER_SAS), MPI matching order would break: %w", info.Provider, ErrNotSupported)
		}
		fab, err := fabric.OpenFabric(info)
		if err != nil {
			return fmt.Errorf("endpoint: open fabric: %w", err)
		}
		dom, err := fab.OpenDomain(info)
		if err != nil {
			fab.Close()
			return fmt.Errorf("endpoint: open domain: %w", err)
		}
		if attach != nil {
			if err := attach(info, dom); err != nil {
				dom.Close()
				fab.Close()
				return err
			}
		}
		w.info, w.fab, w.dom = info, fab, dom
		return nil
	})
	if err != nil {
		return fmt.Errorf("endpoint: select provider: %w", err)
	}
	return nil
}

// attachWorldFabric opens libfabric for the world endpoint v; when no
// provider is chosen yet, a provider whose endpoint cannot be opened is
// passed over. Init only: no other goroutine reaches w yet.
func (w *World) attachWorldFabric(v *vci) error {
	w.mu.Lock()
	open := w.dom != nil
	w.mu.Unlock()
	size := w.bs.Size()
	if open {
		return v.attachFabric(w.info, w.dom, &w.cfg, size)
	}
	return w.selectFabric(func(info *fabric.Info, dom *fabric.Domain) error {
		return v.attachFabric(info, dom, &w.cfg, size)
	})
}

// tagName prefixes a libfabric endpoint name (empty: the rank opened no
// libfabric endpoint) with the provider's name, so that ranks that ended
// with different providers are told apart instead of misreading each
// other's addresses.
func (w *World) tagName(name []byte) []byte {
	if len(name) == 0 {
		return nil
	}
	p := w.info.Provider
	return append(append([]byte{byte(len(p))}, p...), name...)
}

// checkNames strips the provider tags of the ranks' endpoint names and
// checks that every rank that opened libfabric uses this rank's provider,
// and that the provider reaches the rank's node (shm reaches only its
// own: ids tell the nodes apart, whatever WEFT_NODE_ID says).
func (w *World) checkNames(names [][]byte, ids []peerwatch.Ident) error {
	me := w.bs.Rank()
	for r, b := range names {
		if len(b) == 0 {
			continue
		}
		if int(b[0]) >= len(b) {
			return fmt.Errorf("endpoint: malformed endpoint name of rank %d: %w", r, ErrInvalid)
		}
		prov := string(b[1 : 1+b[0]])
		names[r] = b[1+b[0]:]
		if w.info == nil {
			continue
		}
		if prov != w.info.Provider {
			return fmt.Errorf("endpoint: rank %d uses provider %s, this rank (%d) %s: every rank must use the same one (set WEFT_PROVIDER alike on every node): %w",
				r, prov, me, w.info.Provider, ErrNotSupported)
		}
		if prov == "shm" && ids[r].Node != ids[me].Node {
			return fmt.Errorf("endpoint: provider shm reaches only this node, and rank %d is on another node (%s): %w",
				r, strings.SplitN(ids[r].Node, "/", 2)[0], ErrNotSupported)
		}
	}
	return nil
}

// exchange publishes val under key.<rank> and returns every rank's value.
func (w *World) exchange(ctx context.Context, key string, val []byte) ([][]byte, error) {
	if err := w.bs.Put(fmt.Sprintf("%s.%d", key, w.bs.Rank()), val); err != nil {
		return nil, fmt.Errorf("endpoint: publish address: %w", err)
	}
	if err := w.bs.Fence(ctx); err != nil {
		return nil, fmt.Errorf("endpoint: address exchange fence: %w", err)
	}
	out := make([][]byte, w.bs.Size())
	for r := range out {
		b, err := w.bs.Get(ctx, fmt.Sprintf("%s.%d", key, r))
		if err != nil {
			return nil, fmt.Errorf("endpoint: address of rank %d: %w", r, err)
		}
		out[r] = b
	}
	return out, nil
}

func (c *Comm) setLocal() {
	me := c.hosts[c.rank]
	c.lrank, c.lsize = 0, 0
	for r, h := range c.hosts {
		if h == me {
			if r < c.rank {
				c.lrank++
			}
			c.lsize++
		}
	}
}

// Comm returns the world communicator (every rank of the job). Its
// endpoint is locked, so it may be used from several goroutines.
func (w *World) Comm() *Comm {
	if w == nil {
		return nil
	}
	return w.comm
}

// Job returns the job the world was built on.
func (w *World) Job() job.Job {
	if w == nil {
		return nil
	}
	return w.bs
}

// Info returns the granted provider configuration of the world's
// libfabric domain. A job whose peers all use the node transport has not
// opened libfabric; Info opens it then (nil if that fails).
func (w *World) Info() *fabric.Info {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ensureFabric(); err != nil {
		w.log.Warn("open libfabric", "err", err)
		return nil
	}
	return w.info
}

// Close frees every communicator and endpoint of the world, closes the
// fabric objects and finalises the job (when Init started it). It is
// idempotent. Call it once no goroutine uses the world any more. Sends
// that the node transport completed at once (staged), on the world
// communicator or on handles of CreateEndpoints (freed or not), are still
// read by their receivers from this process's memory: Close first waits
// until those receivers have copied them, a receiver's process has
// exited, or the endpoint timeout (WEFT_ENDPOINT_TIMEOUT) has passed, so
// that the process may exit when it returns.
func (w *World) Close() error {
	if w == nil {
		return fmt.Errorf("endpoint: Close of a nil world: %w", ErrInvalid)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	return w.closeAll()
}

func (w *World) closeAll() error {
	w.mu.Lock()
	vcis := w.vcis
	w.vcis = nil
	w.mu.Unlock()
	// The process may exit once Close returns: first every endpoint (the
	// world's, and those of freed handles that still owed their peers)
	// settles what its peers will read from this process.
	var deadline time.Time
	if w.comm != nil && w.comm.v != nil {
		deadline = time.Now().Add(w.comm.v.timeout)
		if !slices.Contains(vcis, w.comm.v) {
			w.comm.v.linger(deadline)
		}
	}
	for _, v := range vcis {
		v.linger(deadline)
	}
	var errs []error
	for _, v := range vcis {
		errs = append(errs, v.shutdown()) // parked ones too
	}
	if w.comm != nil {
		w.comm.freed.Store(true)
		w.comm.v.lock()
		w.comm.v.refs = 1
		w.comm.v.unlock()
		errs = append(errs, w.comm.v.release())
	}
	if w.dom != nil {
		errs = append(errs, w.dom.Close())
	}
	if w.privFab != nil {
		errs = append(errs, w.privFab.Close())
	}
	if w.fab != nil {
		errs = append(errs, w.fab.Close())
	}
	if w.cfg.statsDir != "" {
		errs = append(errs, w.writeStats(w.cfg.statsDir))
	}
	if w.ownBS && w.bs != nil {
		errs = append(errs, w.bs.Finalize())
	}
	return errors.Join(errs...)
}

// usable returns an error for a nil (or zero) or freed communicator. The
// live case is one inlined check (ok); the errors are built out of line.
func (c *Comm) usable(op string) error {
	if c.ok() {
		return nil
	}
	return c.unusable(op)
}

// ok reports whether c is a live communicator (usable's check).
func (c *Comm) ok() bool { return c != nil && c.v != nil && !c.freed.Load() }

func (c *Comm) unusable(op string) error {
	if c == nil || c.v == nil {
		return fmt.Errorf("endpoint: %s on a nil communicator: %w", op, ErrInvalid)
	}
	if c.freed.Load() {
		return fmt.Errorf("endpoint: %s: %w", op, ErrClosed)
	}
	return nil
}

// Rank returns this handle's rank in the communicator (-1 for a nil
// communicator).
func (c *Comm) Rank() int {
	if c == nil {
		return -1
	}
	return c.rank
}

// Size returns the number of ranks in the communicator (0 for a nil
// communicator).
func (c *Comm) Size() int {
	if c == nil {
		return 0
	}
	if c.inter != nil {
		return c.inter.local.size // c.size counts the remote ranks
	}
	return c.size
}

// ContextID returns the communicator's context id (unique among the live
// communicators of every member process; -1 for a nil communicator).
func (c *Comm) ContextID() int {
	if c == nil {
		return -1
	}
	return c.id
}

// Info returns the provider configuration of the communicator's endpoint.
// An endpoint whose peers all use the node transport has no libfabric
// objects; Info (like Domain) opens its domain then, nil if that fails.
func (c *Comm) Info() *fabric.Info {
	if c == nil || c.v == nil {
		return nil
	}
	_, info := c.w.domainOf(c.v)
	return info
}

// Domain returns the libfabric domain of the communicator's endpoint. For
// a private endpoint (CreateEndpoints) the domain is opened with
// FI_THREAD_DOMAIN and belongs to the goroutine driving the endpoint. An
// endpoint whose peers all use the node transport has none until Domain
// opens one (nil if that fails).
func (c *Comm) Domain() *fabric.Domain {
	if c == nil || c.v == nil {
		return nil
	}
	d, _ := c.w.domainOf(c.v)
	return d
}

// domainOf returns v's libfabric domain and info, opening them if v has
// none: the world's domain for the world endpoint and shared ones, a
// domain of its own (FI_THREAD_DOMAIN) for a private endpoint.
func (w *World) domainOf(v *vci) (*fabric.Domain, *fabric.Info) {
	v.lock()
	d, info := v.dom, v.info
	v.unlock()
	if d != nil {
		return d, info
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ensureFabric(); err != nil {
		w.log.Warn("open libfabric", "err", err)
		return nil, nil
	}
	own := false
	switch {
	case w.comm != nil && v == w.comm.v:
		d, info = w.dom, w.info
	case v.shared: // a domain of its own on the world's fabric, as openVCIs gives
		var err error
		if d, err = w.fab.OpenDomain(w.info); err != nil {
			w.log.Warn("open libfabric domain", "err", err)
			return nil, nil
		}
		info, own = w.info, true
	default:
		if err := w.ensurePrivFab(); err != nil {
			w.log.Warn("open libfabric", "err", err)
			return nil, nil
		}
		var err error
		if d, err = w.privFab.OpenDomain(w.privInfo); err != nil {
			w.log.Warn("open libfabric domain", "err", err)
			return nil, nil
		}
		info, own = w.privInfo, true
	}
	v.lock()
	defer v.unlock()
	if v.dom != nil || v.isClosed() { // opened meanwhile, or closing
		if own {
			d.Close()
		}
		return v.dom, v.info
	}
	v.dom, v.info, v.ownDom = d, info, own
	return d, info
}

// NodeLocal returns this rank's index among the communicator's ranks on
// the same host, and how many there are (-1 and 0 for a nil communicator).
func (c *Comm) NodeLocal() (localRank, localSize int) {
	if c == nil {
		return -1, 0
	}
	return c.lrank, c.lsize
}

// Shared reports whether the handle's endpoint is shared (locked).
func (c *Comm) Shared() bool { return c != nil && c.v != nil && c.v.shared }

// Dup returns a communicator with the same group and a new context:
// messages on it never match receives on c. Collective over c.
func (c *Comm) Dup(ctx context.Context) (*Comm, error) {
	if err := c.usable("dup"); err != nil {
		return nil, err
	}
	if err := c.intra("dup"); err != nil {
		return nil, err
	}
	id, _, err := c.allocContext(ctx, nil)
	if err != nil {
		return nil, err
	}
	c.v.retain()
	return &Comm{w: c.w, v: c.v, id: id, ctx: uint16(ctxPerID * id), rank: c.rank, size: c.size,
		addrs: c.addrs, slots: c.slots, mySlot: c.mySlot, hosts: c.hosts, world: c.world, ids: c.ids,
		lrank: c.lrank, lsize: c.lsize, links: c.links}, nil
}

// Split partitions c: ranks passing the same color form a new communicator,
// ordered by key (ties by rank in c). color Undefined returns nil, nil.
// Collective over c.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	if err := c.usable("split"); err != nil {
		return nil, err
	}
	if err := c.intra("split"); err != nil {
		return nil, err
	}
	if color < 0 && color != Undefined {
		return nil, fmt.Errorf("endpoint: split color %d negative: %w", color, ErrInvalid)
	}
	var ck [16]byte
	binary.LittleEndian.PutUint64(ck[:], uint64(int64(color)))
	binary.LittleEndian.PutUint64(ck[8:], uint64(int64(key)))
	id, extras, err := c.allocContext(ctx, ck[:])
	if err != nil {
		return nil, err
	}
	if color == Undefined {
		c.w.releaseContext(id)
		return nil, nil
	}
	type member struct{ key, rank int }
	var ms []member
	for r, b := range extras {
		if len(b) != 16 {
			c.w.releaseContext(id)
			return nil, fmt.Errorf("endpoint: split record of rank %d is %d bytes: %w", r, len(b), ErrInvalid)
		}
		if int(int64(binary.LittleEndian.Uint64(b))) == color {
			ms = append(ms, member{int(int64(binary.LittleEndian.Uint64(b[8:]))), r})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].key != ms[j].key {
			return ms[i].key < ms[j].key
		}
		return ms[i].rank < ms[j].rank
	})
	members := make([]int, len(ms))
	for i, m := range ms {
		members[i] = m.rank
	}
	c.v.retain()
	return c.subset(id, members), nil
}

// subset is the communicator of context id whose rank i is c's rank
// members[i]; c's rank must be among them. It takes no reference on the
// endpoint.
func (c *Comm) subset(id int, members []int) *Comm {
	n := c.w.newComm(c.v, id, c.mySlot, len(members), c.links != nil)
	n.addRanks(c, members...)
	for i, r := range members {
		if r == c.rank {
			n.rank = i
		}
	}
	n.setLocal()
	return n
}

// newComm is a communicator of context id on endpoint v with room for
// size ranks (added by addRanks), node links when links.
func (w *World) newComm(v *vci, id int, slot uint8, size int, links bool) *Comm {
	n := &Comm{w: w, v: v, id: id, ctx: uint16(ctxPerID * id), size: size, mySlot: slot,
		addrs: make([]fabric.Addr, 0, size), slots: make([]uint8, 0, size), hosts: make([]int32, 0, size),
		world: make([]int32, 0, size), ids: make([]uint64, 0, size)}
	if links {
		n.links = make([]int32, 0, size)
	}
	return n
}

// addRanks appends from's ranks listed to n's (a rank of from without a
// node link gets none in n, when n has links).
func (n *Comm) addRanks(from *Comm, ranks ...int) {
	for _, r := range ranks {
		n.addRank(from, r)
	}
}

// addAll appends every rank of from's arrays (for an intercommunicator,
// its remote group) to n's.
func (n *Comm) addAll(from *Comm) {
	for r := range from.ids {
		n.addRank(from, r)
	}
}

func (n *Comm) addRank(from *Comm, r int) {
	n.addrs = append(n.addrs, from.addrs[r])
	n.slots = append(n.slots, from.slots[r])
	n.hosts = append(n.hosts, from.hosts[r])
	n.world = append(n.world, from.world[r])
	n.ids = append(n.ids, from.ids[r])
	if n.links != nil {
		l := int32(-1)
		if from.links != nil {
			l = from.links[r]
		}
		n.links = append(n.links, l)
	}
}

// Free releases the handle: its context id and, with the last handle on it,
// its endpoint. It is local (no communication) and idempotent; operations
// still in flight on the handle are abandoned. The world communicator is
// freed by World.Close. Freeing a nil communicator (what Split returns for
// Undefined) does nothing. An endpoint whose staged sends to another
// process have not been copied by their receivers yet is closed by
// World.Close, once they have, instead of at once.
func (c *Comm) Free() error {
	if c == nil || c.v == nil || c.freed.Load() {
		return nil
	}
	if c == c.w.comm {
		return nil
	}
	c.freed.Store(true)
	if c.inter != nil {
		c.inter.local.Free()
	}
	if c.w.freeContext(c.id) {
		// What arrived for this communicator and was never received is
		// dropped now; what arrives later, while the id is quarantined.
		c.v.dropContext(c.ctx)
	}
	return c.v.release()
}

// Barrier returns once every rank of c has entered it (dissemination
// algorithm over zero-byte messages on c's collective context).
func (c *Comm) Barrier(ctx context.Context) error {
	if err := c.usable("barrier"); err != nil {
		return err
	}
	if err := c.intra("barrier"); err != nil {
		return err
	}
	for k, dist := 0, 1; dist < c.size; k, dist = k+1, dist*2 {
		to := (c.rank + dist) % c.size
		from := (c.rank - dist + c.size) % c.size
		rr, err := c.irecv(nil, from, tagBarrier+k, c.collCtx())
		if err != nil {
			return fmt.Errorf("endpoint: barrier: %w", err)
		}
		sr, err := c.isend(nil, to, tagBarrier+k, c.collCtx())
		if err != nil {
			return fmt.Errorf("endpoint: barrier: %w", err)
		}
		if _, err := waitOrCancel(ctx, rr); err != nil {
			return fmt.Errorf("endpoint: barrier round %d: %w", k, err)
		}
		if _, err := sr.Wait(ctx); err != nil {
			return fmt.Errorf("endpoint: barrier round %d: %w", k, err)
		}
	}
	return nil
}

// collective tags (on the collective context).
const (
	tagBarrier    = 1 << 10 // + round
	tagGatherLen  = 1 << 12
	tagGatherData = 1<<12 + 1
)

// Allgather returns every rank's data, indexed by rank (sizes may differ
// between ranks). Collective over c.
func (c *Comm) Allgather(ctx context.Context, data []byte) ([][]byte, error) {
	if err := c.usable("allgather"); err != nil {
		return nil, err
	}
	if err := c.intra("allgather"); err != nil {
		return nil, err
	}
	return c.allgather(ctx, data, tagGatherLen, tagGatherData)
}

// allgather is Allgather with its two rounds' tags on the collective
// context (the same tag for both is fine: a rank's length goes before its
// data, and the receiver posts its data receive after the length's).
func (c *Comm) allgather(ctx context.Context, data []byte, lenTag, dataTag int) ([][]byte, error) {
	out := make([][]byte, c.size)
	out[c.rank] = append([]byte(nil), data...)
	if c.size == 1 {
		return out, nil
	}
	cc := c.collCtx()
	lens := make([]uint64, c.size) // native byte order on both sides (AsBytes)
	lens[c.rank] = uint64(len(data))
	mine := AsBytes(lens[c.rank : c.rank+1])
	reqs := make([]*Request, 0, 2*c.size)
	fail := func(stage string, err error) ([][]byte, error) {
		for _, r := range reqs {
			if r != nil && !r.Done() {
				_ = r.Cancel()
			}
		}
		return nil, fmt.Errorf("endpoint: allgather %s: %w", stage, err)
	}
	for r := 0; r < c.size; r++ {
		if r == c.rank {
			continue
		}
		req, err := c.irecv(AsBytes(lens[r:r+1]), r, lenTag, cc)
		if err != nil {
			return fail("lengths", err)
		}
		reqs = append(reqs, req)
	}
	for i := 1; i < c.size; i++ {
		r := (c.rank + i) % c.size
		req, err := c.isend(mine, r, lenTag, cc)
		if err != nil {
			return fail("lengths", err)
		}
		reqs = append(reqs, req)
	}
	if err := WaitAll(ctx, reqs...); err != nil {
		return fail("lengths", err)
	}
	reqs = reqs[:0]
	for r := 0; r < c.size; r++ {
		if r == c.rank {
			continue
		}
		out[r] = make([]byte, lens[r])
		req, err := c.irecv(out[r], r, dataTag, cc)
		if err != nil {
			return fail("data", err)
		}
		reqs = append(reqs, req)
	}
	for i := 1; i < c.size; i++ {
		r := (c.rank + i) % c.size
		req, err := c.isend(data, r, dataTag, cc)
		if err != nil {
			return fail("data", err)
		}
		reqs = append(reqs, req)
	}
	if err := WaitAll(ctx, reqs...); err != nil {
		return fail("data", err)
	}
	return out, nil
}
