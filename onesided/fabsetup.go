package onesided

// Setting up a window's libfabric path, in four steps, each its own
// function: choose the domain (the group's, or one of the window's own),
// decide the signal ordering, open the endpoint and memory, and exchange
// peer records (fabpeer.go) and addresses. The signaller of each target
// is chosen at the end of the exchange (fabsignal.go).

import (
	"context"
	"errors"
	"fmt"

	"github.com/weft-hpc/weft/fabric"
)

func init() {
	newNetPath = func(ctx context.Context, w *Window, region []byte, ownCtrl bool) (netPath, error) {
		np, err := openFabPath(ctx, w, region, ownCtrl)
		if f, ok := np.(*fabPath); ok && f != nil && err == nil {
			return guardPath(f), nil
		}
		return np, err
	}
}

func newFabPath(w *Window, region []byte) *fabPath {
	return &fabPath{w: w, pend: newOpTable(w.size), deferred: make([][]deferredSig, w.size),
		comp: make([]fabric.Completion, 64), local: region, dirty: make([]bool, w.size), injMax: -1,
		cqSig: make([]bool, w.size), slotBits: make([]int, w.size)}
}

func openFabPath(ctx context.Context, w *Window, region []byte, ownCtrl bool) (np netPath, err error) {
	f := newFabPath(w, region)
	defer func() {
		if err == nil {
			return
		}
		if p := w.procPeers; p != nil {
			// Ranks of this process may already have this rank's
			// address (see procpeers.go).
			w.procPeers = nil
			p.leave(w.rank, func() { _ = f.close() })
			return
		}
		_ = f.close()
	}()
	if err := f.chooseDomain(); err != nil {
		return nil, err
	}
	if err := f.setOrdering(region); err != nil {
		return nil, err
	}
	if err := f.open(region, ownCtrl); err != nil {
		return nil, err
	}
	if err := f.exchange(ctx, region); err != nil {
		return nil, err
	}
	info := f.info
	w.log.Debug("libfabric path", "provider", info.Provider, "order", f.order, "msg_order", info.MsgOrder,
		"waw_max", f.wawMax, "inject_max", f.injMax, "cq_data", info.CQDataSize, "signal_sink", f.sink != nil, "atomic", info.Caps.Has(fabric.CapAtomic), "progress", info.DataProgress)
	return f, nil
}

// canShareDomain reports whether a window with options o opens its
// endpoint in a group's domain described by info: the domain grants RMA
// and atomics (and FI_FENCE when that ordering is forced) and no provider
// was named.
func canShareDomain(info *fabric.Info, o options) bool {
	return info.Caps.Has(fabric.CapRMA|fabric.CapAtomic|fabric.CapRemoteWrite|fabric.CapRemoteRead) &&
		o.provider == "" && (o.order != OrderFence || info.Caps.Has(fabric.CapFence))
}

// chooseDomain sets f.dom and f.info: the group's domain when it offers
// one that fits (FabricGroup, canShareDomain), else a fabric and domain
// of the window's own.
func (f *fabPath) chooseDomain() error {
	w := f.w
	if fg, ok := w.g.(FabricGroup); ok && fg.Domain() != nil && fg.Info() != nil && canShareDomain(fg.Info(), w.opts) {
		f.dom, f.info = fg.Domain(), fg.Info()
		return nil
	}
	// shm is a candidate only when it reaches every rank: all on this
	// machine (pretend nodes of WEFT_NODE_ID included).
	var err error
	if f.info, err = selectInfo(w.opts, w.oneMachine); err != nil {
		return err
	}
	if f.fab, err = fabric.OpenFabric(f.info); err != nil {
		return err
	}
	f.dom, err = f.fab.OpenDomain(f.info)
	return err
}

func rmaHints(o options, withAtomic, withOrder bool) *fabric.Hints {
	h := &fabric.Hints{
		Provider: o.provider,
		EPType:   fabric.EPRDM,
		Caps:     fabric.CapRMA | fabric.CapRead | fabric.CapWrite | fabric.CapRemoteRead | fabric.CapRemoteWrite,
	}
	if withAtomic {
		h.Caps |= fabric.CapAtomic
	}
	if o.order == OrderFence {
		h.Caps |= fabric.CapFence
	}
	if withOrder {
		h.MsgOrder = fabric.OrderRMAWAW
	}
	if o.order == OrderCQData {
		h.Caps |= fabric.CapRemoteCQData // keeps providers with CQ data only
	}
	return h
}

// selectInfo finds a provider configuration for RMA, preferring atomics and
// write-after-write ordering, dropping them when no provider grants them.
func selectInfo(o options, oneNode bool) (*fabric.Info, error) {
	var errs []error
	for _, c := range []struct{ atomic, order bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		if (o.order == OrderWAW || o.order == OrderCQData) && !c.order {
			continue
		}
		info, err := fabric.Select(rmaHints(o, c.atomic, c.order), oneNode)
		if err == nil {
			return info, nil
		}
		errs = append(errs, err)
	}
	err := fmt.Errorf("no RMA provider: %w", errors.Join(errs...))
	if o.order == OrderFence || o.order == OrderWAW || o.order == OrderCQData {
		err = fmt.Errorf("signal ordering %v: %w: %w", o.order, ErrNotSupported, err)
	}
	return nil, err
}

func grantsWAW(i *fabric.Info) bool {
	return i.MsgOrder.Has(fabric.OrderRMAWAW) || i.MsgOrder.Has(fabric.OrderWAW)
}

// cqDataLacks says why the provider cannot carry signals in remote CQ
// data ("" when it can).
func cqDataLacks(i *fabric.Info) string {
	switch {
	case !grantsWAW(i):
		return fmt.Sprintf("does not grant write-after-write ordering (%v)", i.MsgOrder)
	case i.CQDataSize < 8:
		return fmt.Sprintf("grants %d bytes of remote CQ data, not 8", i.CQDataSize)
	case noInject:
		return "needs injected writes (WEFT_TUNE=osinject=0)"
	}
	return ""
}

// decideOrdering returns the signal ordering a path on a provider
// described by info uses when forced is asked for: forced itself if the
// provider can give it (else an ErrNotSupported error), or for OrderAuto
// the best it offers.
func decideOrdering(forced SignalOrdering, info *fabric.Info) (SignalOrdering, error) {
	switch forced {
	case OrderWAW:
		if !grantsWAW(info) {
			return 0, fmt.Errorf("provider %s does not grant write-after-write ordering (%v): %w",
				info.Provider, info.MsgOrder, ErrNotSupported)
		}
		return forced, nil
	case OrderFence:
		if !info.Caps.Has(fabric.CapFence) {
			return 0, fmt.Errorf("provider %s does not support FI_FENCE: %w", info.Provider, ErrNotSupported)
		}
		return forced, nil
	case OrderDelivery:
		return forced, nil
	case OrderCQData:
		if why := cqDataLacks(info); why != "" {
			return 0, fmt.Errorf("signals in remote CQ data: provider %s %s: %w", info.Provider, why, ErrNotSupported)
		}
		return forced, nil
	}
	switch {
	case grantsWAW(info) && cqDataLacks(info) == "" && info.DataProgress == fabric.ProgressManual:
		// Manual progress only: there a plain signal write is not
		// applied before the target reads its CQ either, so a signal in
		// CQ data is seen exactly as early.
		return OrderCQData, nil
	case grantsWAW(info):
		return OrderWAW, nil
	case info.Caps.Has(fabric.CapFence):
		return OrderFence, nil
	}
	return OrderDelivery, nil
}

// injectLimit is the largest PutSignal (and Put) data a path with
// ordering order injects on a provider described by info, or -1: only
// with write-after-write ordering, at most the provider's inject size,
// maxInject, and its WAW limit.
func injectLimit(order SignalOrdering, info *fabric.Info) int {
	if order != OrderWAW && order != OrderCQData || noInject {
		return -1
	}
	n := min(info.InjectSize, maxInject)
	if info.MaxOrderWAWSize >= 0 {
		n = min(n, info.MaxOrderWAWSize)
	}
	return n
}

// setOrdering decides the path's signal ordering (decideOrdering), makes
// the signal sink that takes signals in CQ data into region (falling back
// to OrderWAW when that was not forced and no sink can be made), and sets
// the limits that follow from the ordering. The window's option records
// the ordering chosen.
func (f *fabPath) setOrdering(region []byte) error {
	w, info := f.w, f.info
	forced := w.opts.order
	order, err := decideOrdering(forced, info)
	if err != nil {
		return err
	}
	if order == OrderCQData {
		if f.sink, err = fabric.NewSignalSink(region, w.size); err != nil {
			if forced == OrderCQData {
				return fmt.Errorf("signals in remote CQ data: %w: %w", ErrNotSupported, err)
			}
			order = OrderWAW
		}
	}
	w.opts.order = order
	f.order = order
	f.wawMax = info.MaxOrderWAWSize
	f.injMax = injectLimit(order, info)
	return nil
}

// open opens the path's CQ, AV and endpoint, registers region, and
// allocates the scratch slots, the staging buffer of injected PutSignals
// and, with ownCtrl, the control words.
func (f *fabPath) open(region []byte, ownCtrl bool) error {
	var err error
	if f.cq, err = f.dom.OpenCQ(4096); err != nil {
		return err
	}
	if f.av, err = f.dom.OpenAV(f.w.size); err != nil {
		return err
	}
	if f.ep, err = f.dom.OpenEndpoint(f.info, f.cq, f.av); err != nil {
		return err
	}
	if f.mr, err = f.dom.Register(region, fabric.AccessAll); err != nil {
		return err
	}
	if f.scratch, err = f.dom.Alloc(slotSize * slotCount); err != nil {
		return err
	}
	f.freeSlots = make([]int, 0, slotCount)
	for i := slotCount - 1; i >= 0; i-- {
		f.freeSlots = append(f.freeSlots, i)
	}
	if f.injMax >= 0 {
		if f.stage, err = f.dom.Alloc(8 + max(f.injMax, 8)); err != nil {
			return err
		}
	}
	if ownCtrl {
		if f.ctrlBuf, err = f.dom.Alloc(f.w.ctrlLen); err != nil {
			return err
		}
	}
	return nil
}

// localRecord is this rank's peer record.
func (f *fabPath) localRecord(region []byte) (peerRecord, error) {
	name, err := f.ep.Name()
	if err != nil {
		return peerRecord{}, err
	}
	r := peerRecord{
		key: f.mr.Key(), base: f.mr.RemoteAddr(region),
		ckey: f.mr.Key(), cbase: f.mr.RemoteAddr(region),
		cqSink:    f.sink != nil,
		regionLen: uint64(len(region)),
		procKey:   procKey(),
		pathSeq:   windowSeq.Add(1),
		provider:  f.info.Provider,
		name:      name,
	}
	if f.ctrlBuf != nil {
		r.ckey, r.cbase = f.ctrlBuf.MR().Key(), f.ctrlBuf.MR().RemoteAddr(f.ctrlBuf.Bytes())
	}
	return r, nil
}

// exchange gathers every rank's peer record, joins the in-process ranks
// (procpeers.go), checks the records, inserts the addresses, chooses the
// signallers, and, on sockets, connects in a fixed order.
func (f *fabPath) exchange(ctx context.Context, region []byte) error {
	w := f.w
	me, err := f.localRecord(region)
	if err != nil {
		return err
	}
	rec, err := me.MarshalBinary()
	if err != nil {
		return err
	}
	all, err := w.g.Allgather(ctx, rec)
	if err != nil {
		return fmt.Errorf("exchange endpoint names: %w", err)
	}
	if len(all) != w.size {
		return fmt.Errorf("exchange endpoint names: %d records for %d ranks: %w", len(all), w.size, ErrInvalid)
	}
	recs := make([]peerRecord, w.size)
	ok := make([]bool, w.size)
	var bad error
	for r, m := range all {
		if err := recs[r].UnmarshalBinary(m); err != nil {
			if bad == nil {
				bad = fmt.Errorf("endpoint record from rank %d: %w", r, err)
			}
			continue
		}
		ok[r] = true
	}
	// Join before reporting a bad record: the ranks of this process see
	// the same records, so they all join (and leave) the same set.
	w.procPeers = sameProcess(recs, ok)
	if bad != nil {
		return bad
	}
	f.keys = make([]uint64, w.size)
	f.bases = make([]uint64, w.size)
	f.ckeys = make([]uint64, w.size)
	f.cbases = make([]uint64, w.size)
	for r := range recs {
		p := &recs[r]
		if p.provider != f.info.Provider {
			return fmt.Errorf("rank %d uses provider %q, this rank %q: %w", r, p.provider, f.info.Provider, ErrInvalid)
		}
		f.keys[r], f.bases[r], f.ckeys[r], f.cbases[r] = p.key, p.base, p.ckey, p.cbase
		f.slotBits[r] = fabric.SignalSlotBits(int(p.regionLen))
		f.cqSig[r] = f.order == OrderCQData && p.cqSink && r != w.rank
	}
	// One name at a time: names may differ in length (shm's carry a pid).
	f.addrs = make([]fabric.Addr, w.size)
	for r := range recs {
		a, err := f.av.Insert(recs[r].name)
		if err != nil {
			return fmt.Errorf("insert rank %d's address: %w", r, err)
		}
		f.addrs[r] = a[0]
	}
	f.chooseSignallers()
	if err := w.g.Barrier(ctx); err != nil {
		return err
	}
	if f.info.Provider == "sockets" {
		if err := f.connectInOrder(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sameProcess joins the set of the window's ranks in this process, read
// from the exchanged records (ok[r]: rank r's decoded), or returns nil
// when this rank is alone in its process. Every rank of this process
// sees the same records, so they all join the same set.
func sameProcess(recs []peerRecord, ok []bool) *procPeers {
	me := procKey()
	n, key := 0, uint64(0)
	for r := range recs {
		if !ok[r] || recs[r].procKey != me {
			continue
		}
		if n == 0 {
			key = recs[r].pathSeq // the lowest such rank's
		}
		n++
	}
	if n < 2 {
		return nil
	}
	return joinProcPeers(key, n)
}

// connectInOrder establishes the connections of a sockets endpoint in two
// phases (lower to higher ranks, a barrier, then higher to lower), each by a
// write to the peer's spare control word. The sockets provider of libfabric
// 1.17 intermittently fails operations with EIO, or loses them, when two
// endpoints connect to each other at the same moment (seen in the put-signal
// stress test); connecting in a fixed order avoids that.
func (f *fabPath) connectInOrder(ctx context.Context) error {
	const spare = ctrlBytes - 8
	me := f.w.rank
	for phase := 0; phase < 2; phase++ {
		for r := 0; r < f.w.size; r++ {
			if r == me || (phase == 0) != (r > me) {
				continue
			}
			if err := f.ctrlSignal(r, spare, 1); err != nil {
				return fmt.Errorf("connect to rank %d: %w", r, err)
			}
		}
		if err := f.flush(ctx, -1); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		if err := f.w.g.Barrier(ctx); err != nil {
			return err
		}
	}
	return nil
}
