package endpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/fabric"
)

// CreateEndpoints is collective over c: every rank of c calls it once
// (with its own n ≥ 0). It creates one new communicator whose ranks are the
// endpoints of all callers, numbered in c's rank order (the n endpoints of
// c's rank 0 first), and returns this caller's n handles to it, in rank
// order. Each handle behaves as a separate rank.
//
// By default every handle owns a private libfabric endpoint with its own
// completion queue and address vector, in its own domain opened with
// FI_THREAD_DOMAIN (the providers here have no scalable endpoints): one
// goroutine drives each handle and the hot path takes no lock, and handles
// progress independently. With Shared(true) (or WEFT_ENDPOINT_SHARED=1)
// all n handles of a process share one FI_THREAD_SAFE endpoint behind a
// mutex, the baseline to measure the private design against.
//
// Free each handle when done (World.Close frees any left).
func (c *Comm) CreateEndpoints(ctx context.Context, n int, opts ...Option) ([]*Comm, error) {
	if err := c.usable("create endpoints"); err != nil {
		return nil, err
	}
	if err := c.intra("create endpoints"); err != nil {
		return nil, err
	}
	w := c.w
	cfg := w.cfg
	// Check the arguments and open the local endpoints first; a failure
	// is still reported to the peers through the allgather, so that
	// nobody waits for this rank.
	var vcis []*vci
	var oerr error
	switch err := cfg.apply(opts); {
	case err != nil:
		oerr = err
	case n < 0 || n > MaxRanks:
		oerr = fmt.Errorf("endpoint: create %d endpoints (a communicator holds at most %d ranks): %w", n, MaxRanks, ErrInvalid)
	case cfg.shared && n > MaxSharedHandles:
		oerr = fmt.Errorf("endpoint: %d shared handles exceed %d: %w", n, MaxSharedHandles, ErrInvalid)
	default:
		vcis, oerr = w.openEndpoints(ctx, n, &cfg)
	}
	if oerr != nil {
		n = 0
	}
	// Record: status u8 | shared u8 | n u32 | call u32 | then per distinct
	// endpoint: len u32, name. call numbers this process's CreateEndpoints
	// calls, for the new ranks' identities (epIdentity).
	w.mu.Lock()
	w.epCalls++
	call := w.epCalls
	w.mu.Unlock()
	rec := []byte{0, 0}
	if oerr != nil {
		rec[0] = 1
	}
	if cfg.shared {
		rec[1] = 1
	}
	rec = binary.LittleEndian.AppendUint32(rec, uint32(n))
	rec = binary.LittleEndian.AppendUint32(rec, call)
	for _, v := range vcis {
		rec = binary.LittleEndian.AppendUint32(rec, uint32(len(v.name)))
		rec = append(rec, v.name...)
	}
	id, all, err := c.allocContext(ctx, rec)
	if err != nil || oerr != nil {
		for _, v := range vcis {
			v.release()
		}
		if oerr != nil {
			if err == nil {
				w.releaseContext(id)
			}
			return nil, oerr
		}
		return nil, err
	}
	fail := func(err error) ([]*Comm, error) {
		w.releaseContext(id)
		for _, v := range vcis {
			v.release()
		}
		return nil, err
	}
	// Decode the new group: per parent rank, its endpoints.
	type epRec struct {
		name  []byte
		slot  uint8
		host  int32
		world int32 // the owner's world rank
		owner int   // parent rank
		addrI int   // index of its distinct address
		id    uint64
	}
	var eps []epRec
	var names [][]byte
	var addrOwner, addrIdx []int // per distinct address: parent rank, index among its endpoints
	first := -1
	for pr, b := range all {
		if len(b) < 10 {
			return fail(fmt.Errorf("endpoint: endpoint record of rank %d is %d bytes: %w", pr, len(b), ErrInvalid))
		}
		if b[0] != 0 {
			return fail(fmt.Errorf("endpoint: rank %d failed to create its endpoints: %w", pr, errs.ErrRemote))
		}
		shared := b[1] != 0
		cnt := int(binary.LittleEndian.Uint32(b[2:]))
		pcall := binary.LittleEndian.Uint32(b[6:])
		b = b[10:]
		var pnames [][]byte
		for len(b) >= 4 {
			l := int(binary.LittleEndian.Uint32(b))
			if l > len(b)-4 {
				return fail(fmt.Errorf("endpoint: endpoint record of rank %d truncated: %w", pr, ErrInvalid))
			}
			pnames = append(pnames, b[4:4+l])
			b = b[4+l:]
		}
		k := len(pnames) // shared: 1..cnt locked endpoints; private: one per handle
		if (!shared && k != cnt) || (shared && cnt > 0 && (k < 1 || k > cnt)) || (cnt == 0 && k != 0) {
			return fail(fmt.Errorf("endpoint: rank %d sent %d endpoint names for %d endpoints: %w", pr, len(pnames), cnt, ErrInvalid))
		}
		if pr == c.rank {
			first = len(eps)
		}
		base := len(names)
		names = append(names, pnames...)
		for i := range pnames {
			addrOwner, addrIdx = append(addrOwner, pr), append(addrIdx, i)
		}
		for i := 0; i < cnt; i++ {
			e := epRec{slot: 0, host: c.hosts[pr], world: c.world[pr], owner: pr, addrI: base + i,
				id: epIdentity(c.world[pr], pcall, i)}
			if shared {
				e.slot, e.addrI = uint8(i), base+sharedGroup(i, cnt, k)
			}
			e.name = names[e.addrI]
			eps = append(eps, e)
		}
	}
	if len(eps) > MaxRanks {
		return fail(fmt.Errorf("endpoint: %d endpoints exceed the tag layout's %d ranks: %w", len(eps), MaxRanks, ErrInvalid))
	}
	rankAddr := make([]int, len(eps))
	for r, e := range eps {
		rankAddr[r] = e.addrI
	}
	links, err := w.connectEndpoints(ctx, c, cfg.native, vcis, addrOwner, addrIdx, rankAddr)
	if err != nil {
		return fail(err)
	}
	allNode := links != nil && !slices.Contains(links, -1)
	// A rank that had not opened libfabric (its peers all on the node
	// transport, nothing asked for its domain) publishes no names; ranks
	// that had opened it then have nothing to insert for it, and need
	// nothing when every peer is on the node transport.
	unnamed := slices.ContainsFunc(names, func(b []byte) bool { return len(b) == 0 })
	out := make([]*Comm, n)
	for li, v := range vcis {
		var addrs []fabric.Addr
		switch {
		case v.av != nil && !(unnamed && allNode):
			if addrs, err = v.av.Insert(names...); err != nil {
				return fail(fmt.Errorf("endpoint: insert %d endpoint addresses: %w", len(names), err))
			}
		case allNode:
			addrs = make([]fabric.Addr, len(names)) // never used
		default:
			// Every rank sees the same records: all of them fail here.
			return fail(fmt.Errorf("endpoint: a peer of the new endpoints cannot use the node transport, and libfabric was not opened (set %s alike on every rank): %w", EnvNodeTransport, ErrNotSupported))
		}
		mk := func(slot int) *Comm {
			nc := &Comm{w: w, v: v, id: id, ctx: uint16(ctxPerID * id), size: len(eps),
				addrs: make([]fabric.Addr, len(eps)), slots: make([]uint8, len(eps)), hosts: make([]int32, len(eps)),
				world: make([]int32, len(eps)), ids: make([]uint64, len(eps))}
			for r, e := range eps {
				nc.addrs[r], nc.slots[r], nc.hosts[r], nc.world[r], nc.ids[r] = addrs[e.addrI], e.slot, e.host, e.world, e.id
			}
			nc.links = links
			nc.rank = first + slot
			nc.mySlot = uint8(slot)
			if !cfg.shared {
				nc.mySlot = 0
			}
			nc.setLocal()
			return nc
		}
		if cfg.shared {
			v.refs = 0
			for i := 0; i < n; i++ {
				if sharedGroup(i, n, len(vcis)) == li {
					out[i] = mk(i)
					v.refs++
				}
			}
		} else {
			out[li] = mk(li)
		}
	}
	for _, v := range vcis {
		w.joinSet(id, v)
	}
	w.mu.Lock()
	w.vcis = append(w.vcis, vcis...)
	for i := 1; i < n; i++ {
		w.ctxRefs[id]++ // one reference per handle; Free drops one each
	}
	w.mu.Unlock()
	if n == 0 {
		w.releaseContext(id)
	}
	return out, nil
}

// openEndpoints opens n private endpoints (own domain each) or, shared, one
// locked endpoint.
func (w *World) openEndpoints(ctx context.Context, n int, cfg *config) ([]*vci, error) {
	if n == 0 {
		return nil, nil
	}
	avCount := 64
	k := n
	if cfg.shared {
		k = min(max(cfg.sharedEPs, 1), n)
	}
	w.mu.Lock()
	noFabric := w.dom == nil && cfg.native
	w.mu.Unlock()
	if noFabric {
		// The world needed no libfabric: all of its ranks share this node
		// and the node transport, so the new endpoints will too.
		out := make([]*vci, 0, min(k, 64))
		for range k {
			if err := ctx.Err(); err != nil {
				return out, errors.Join(fmt.Errorf("endpoint: open %d endpoints: %w", k, err), releaseAll(out))
			}
			out = append(out, newVCI(w, cfg, cfg.shared))
		}
		return out, nil
	}
	if cfg.shared {
		w.mu.Lock()
		err := w.ensureFabric()
		w.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return w.openVCIs(ctx, w.fab, w.info, k, cfg, avCount, true)
	}
	w.mu.Lock()
	err := w.ensurePrivFab()
	info, fab := w.privInfo, w.privFab
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return w.openVCIs(ctx, fab, info, n, cfg, avCount, false)
}

// ensurePrivFab opens the FI_THREAD_DOMAIN fabric private endpoints live
// in (and the world's, which it follows). Caller holds w.mu.
func (w *World) ensurePrivFab() error {
	if w.privInfo != nil {
		return nil
	}
	if err := w.ensureFabric(); err != nil {
		return err
	}
	h := w.hints(fabric.ThreadDomain)
	h.Provider = w.info.Provider
	info, err := fabric.GetInfo(h)
	if err != nil || len(info) == 0 {
		return fmt.Errorf("endpoint: provider %s with FI_THREAD_DOMAIN: %w", w.info.Provider, err)
	}
	fab, err := fabric.OpenFabric(info[0])
	if err != nil {
		return fmt.Errorf("endpoint: open fabric for private endpoints: %w", err)
	}
	w.privInfo, w.privFab = info[0], fab
	return nil
}

// openVCIs opens n endpoints, each in a domain of its own on fab; shared
// ones are locked. On failure it closes what it opened.
func (w *World) openVCIs(ctx context.Context, fab *fabric.Fabric, info *fabric.Info, n int, cfg *config, avCount int, shared bool) ([]*vci, error) {
	var out []*vci
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return out, errors.Join(fmt.Errorf("endpoint: open %d endpoints: %w", n, err), releaseAll(out))
		}
		if avail, total, ok := memAvailable(); ok && avail < total/memReserve {
			return out, errors.Join(fmt.Errorf("endpoint: open endpoint %d of %d: %d MiB of the node's %d MiB of memory left: %w",
				i+1, n, avail>>20, total>>20, syscall.ENOMEM), releaseAll(out))
		}
		dom, err := fab.OpenDomain(info)
		if err != nil {
			return out, errors.Join(fmt.Errorf("endpoint: open domain of endpoint %d: %w", i, err), releaseAll(out))
		}
		v, err := openVCI(w, info, dom, cfg, avCount, shared)
		if err != nil {
			dom.Close()
			return out, errors.Join(err, releaseAll(out))
		}
		v.ownDom = true
		out = append(out, v)
	}
	return out, nil
}

// sharedGroup is the locked endpoint (of k) that shared handle i of n uses.
func sharedGroup(i, n, k int) int { return i * k / n }

// memReserve: opening libfabric endpoints stops, with ENOMEM, once less
// than 1/memReserve of the node's memory is available. A provider's
// endpoint takes memory that the kernel hands out only as it is touched
// (shm: 3–5 MiB of shared memory each), so an endpoint count beyond
// what the node holds would otherwise end in the OOM killer, not an error.
const memReserve = 16

// memAvailable reads MemAvailable and MemTotal from /proc/meminfo, in bytes.
func memAvailable() (avail, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, false
	}
	return parseMeminfo(b)
}

// parseMeminfo reads MemAvailable and MemTotal from the text of /proc/meminfo.
func parseMeminfo(b []byte) (avail, total uint64, ok bool) {
	var haveA, haveT bool
	for line := range strings.Lines(string(b)) {
		k, v, found := strings.Cut(line, ":")
		if !found || (k != "MemAvailable" && k != "MemTotal") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, false
		}
		x, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if k == "MemAvailable" {
			avail, haveA = x<<10, true
		} else {
			total, haveT = x<<10, true
		}
	}
	if !haveA || !haveT {
		return 0, 0, false
	}
	return avail, total, true
}

func releaseAll(vs []*vci) error {
	var errs []error
	for _, v := range vs {
		errs = append(errs, v.release())
	}
	return errors.Join(errs...)
}
