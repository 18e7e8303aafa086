package fabric

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// AutoProviders is the order in which Select tries providers when neither
// Hints.Provider nor WEFT_PROVIDER names one: the RDMA providers first
// (InfiniBand and RoCE through verbs, AWS EFA), then TCP, then the sockets
// provider as a last resort. A job whose ranks all share one node tries
// "shm" before them.
var AutoProviders = []string{"verbs;ofi_rxm", "efa", "tcp;ofi_rxm", "sockets"}

// Candidates returns the providers Select tries for hints h, in order.
// A provider named by h.Provider, else by WEFT_PROVIDER, is tried alone;
// either may list several, separated by commas ("verbs;ofi_rxm,tcp;ofi_rxm"),
// tried in that order. Otherwise the order is "shm" (only when
// allOnOneNode) followed by AutoProviders.
//
// "shm" reaches only processes on this node: when the job spans nodes
// (allOnOneNode false) it is never a candidate, and naming only shm is an
// error wrapping ErrInvalid, returned at once instead of a job that hangs
// until its timeout.
func Candidates(h *Hints, allOnOneNode bool) ([]string, error) {
	named := ""
	if h != nil {
		named = h.Provider
	}
	if named == "" {
		named = envProvider()
	}
	if named == "" {
		if allOnOneNode {
			return append([]string{"shm"}, AutoProviders...), nil
		}
		return append([]string(nil), AutoProviders...), nil
	}
	var out, dropped []string
	for _, p := range strings.Split(named, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case p == "shm" && !allOnOneNode:
			dropped = append(dropped, p)
		default:
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		if len(dropped) > 0 {
			return nil, fmt.Errorf("fabric: provider %q: shm reaches only processes on one node, and this job's ranks are on several nodes (name a network provider such as tcp;ofi_rxm or verbs;ofi_rxm, or leave the provider unset): %w", named, ErrInvalid)
		}
		return nil, fmt.Errorf("fabric: provider %q names no provider: %w", named, ErrInvalid)
	}
	return out, nil
}

// Select picks the provider for a job: the first of Candidates(h,
// allOnOneNode) that offers a configuration matching h (GetInfo), whose
// first configuration it returns. The error names every provider tried and
// why each failed, and wraps ErrNoProvider when none matches; it wraps
// ErrInvalid for a bad provider list (shm across nodes) and
// ErrNotSupported when libfabric cannot be loaded. SelectOpen also falls
// back when a provider matches but cannot be opened.
func Select(h *Hints, allOnOneNode bool) (*Info, error) {
	return SelectOpen(h, allOnOneNode, nil)
}

// SelectOpen is Select with a trial: for each candidate that matches h it
// calls open (when not nil) with the configuration, and moves on to the
// next candidate when open returns an error, e.g. because fi_fabric,
// fi_domain or fi_enable fails for that provider on this machine (a verbs
// device whose completion queues are too small, an EFA device held by
// another job). open must release whatever it opened for a candidate it
// fails. SelectOpen returns the configuration open accepted; when every
// candidate fails, an error wrapping ErrNoProvider that names each
// provider with its reason.
//
// Every rank of a job must end with the same provider. Ranks that see the
// same hardware fail the same way; a caller whose ranks might not (a
// device missing on one node) should exchange the chosen provider and
// stop when they differ, as package endpoint does.
func SelectOpen(h *Hints, allOnOneNode bool, open func(*Info) error) (*Info, error) {
	if err := checkSettings(); err != nil {
		return nil, err
	}
	var hh Hints
	if h != nil {
		hh = *h
	}
	order, err := Candidates(&hh, allOnOneNode)
	if err != nil {
		return nil, err
	}
	setUniverseSize(hh.JobSize)
	if err := loadLib(); err != nil {
		return nil, err
	}
	var why []string
	for _, p := range order {
		hh.Provider = p
		infos, err := GetInfo(&hh)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", p, trimNoProvider(err)))
			continue
		}
		if open != nil {
			if err := open(infos[0]); err != nil {
				log.Debug("provider unusable, trying the next one", "provider", p, "err", err)
				why = append(why, fmt.Sprintf("%s: %v", p, err))
				continue
			}
		}
		log.Debug("selected provider", "info", infos[0].String(), "tried", strings.Join(order, ", "))
		if infos[0].Provider == "sockets" && runtime.NumCPU() <= 2 {
			log.Warn("the sockets provider degrades badly when CPUs are oversubscribed", "cpus", runtime.NumCPU())
		}
		if len(why) > 0 {
			log.Info("provider fallback", "chosen", infos[0].Provider, "passed over", strings.Join(why, "; "))
		}
		return infos[0], nil
	}
	return nil, fmt.Errorf("fabric: no usable provider (tried %s): %s: %w", strings.Join(order, ", "), strings.Join(why, "; "), ErrNoProvider)
}

// trimNoProvider drops the "fabric: " prefix and the sentinel's own text
// from a GetInfo error, so that the reason list stays readable.
func trimNoProvider(err error) string {
	s := strings.TrimPrefix(err.Error(), "fabric: ")
	if errors.Is(err, ErrNoProvider) {
		s = strings.TrimSuffix(s, ": "+ErrNoProvider.Error())
	}
	return s
}

var universe struct {
	sync.Mutex
	set bool
}

// setUniverseSize sets FI_UNIVERSE_SIZE to n when the environment does not
// set it and no Select has set it before. libfabric reads it once, when
// it initialises (the first GetInfo of the process); ofi_rxm sizes its
// completion queues by it, and its default (256) makes verbs;ofi_rxm fail
// to enable on devices with small completion queues (Soft-RoCE), while a
// job larger than it overruns them on any device.
func setUniverseSize(n int) {
	if n <= 0 {
		return
	}
	universe.Lock()
	defer universe.Unlock()
	if universe.set {
		return
	}
	universe.set = true
	if _, ok := os.LookupEnv("FI_UNIVERSE_SIZE"); ok {
		return
	}
	if Loaded() {
		// libfabric may have read it already; setting it now would make
		// the environment lie about what the process uses.
		log.Debug("FI_UNIVERSE_SIZE not set: libfabric was initialised before the job size was known", "size", n)
		return
	}
	os.Setenv("FI_UNIVERSE_SIZE", strconv.Itoa(n))
}
