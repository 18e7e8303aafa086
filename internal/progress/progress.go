// Package progress lets a call blocked in one layer of weft keep the
// others progressing.
//
// Every endpoint and every window with a libfabric path registers a poll
// function here when it opens and removes it when it closes. A wait that
// is past its spin budget (internal/wait) calls PollAll between its own
// polls, so that a rank blocked in, say, an Allgather still serves the RMA
// a peer's Get needs from its window, and a rank blocked in a window
// flush still answers the messages of its endpoints.
//
// A poll function must never block and never race with the object's
// owner. Objects that take a mutex use TryLock; lock-free ones use a
// Guard, which costs their owners nothing beyond the atomic counter they
// keep anyway: the owner counts itself in and out (Enter, Exit), and a
// foreign poller claims the object only while nobody is inside
// (TryForeign), making an owner that arrives meanwhile wait for the one
// poll to end.
package progress

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/release"
)

// foreign is the Guard count a foreign poller adds: far above any number
// of owner goroutines inside at once.
const foreign = 1 << 24

// Guard is the in/out counter of a lock-free object that foreign pollers
// may claim when it is idle. The zero Guard is idle.
type Guard struct{ n atomic.Int32 }

// Enter counts a goroutine of the object's own into it. If a foreign
// poller holds the object it waits until that poll has ended (one
// non-blocking progress call).
func (g *Guard) Enter() {
	if g.n.Add(1) >= foreign {
		g.waitForeign()
	}
}

//go:noinline
func (g *Guard) waitForeign() {
	for g.n.Load() >= foreign {
		runtime.Gosched()
	}
}

// Exit undoes one Enter.
func (g *Guard) Exit() { g.n.Add(-1) }

// Busy reports whether a goroutine (owner or foreign poller) is inside.
func (g *Guard) Busy() bool { return g.n.Load() != 0 }

// TryForeign claims the object for one foreign poll if nobody is inside;
// a true result must be paired with EndForeign. It never waits.
func (g *Guard) TryForeign() bool {
	return g.n.Load() == 0 && g.n.CompareAndSwap(0, foreign)
}

// EndForeign ends a poll that TryForeign began.
func (g *Guard) EndForeign() { g.n.Add(-foreign) }

// Source is one registered poll function.
type Source struct{ poll func() }

var (
	regMu   sync.Mutex
	sources atomic.Pointer[[]*Source] // copy on write: PollAll takes no lock
)

// Register adds poll to the functions PollAll calls and returns its
// handle for Unregister. poll must return at once when it cannot claim
// its object, must not block and must not call PollAll.
func Register(poll func()) *Source {
	s := &Source{poll: poll}
	regMu.Lock()
	defer regMu.Unlock()
	var list []*Source
	if p := sources.Load(); p != nil {
		list = append(list, *p...)
	}
	list = append(list, s)
	sources.Store(&list)
	return s
}

// Unregister removes s (nil or already removed: nothing). A PollAll that
// began earlier may still call it once: poll functions must recognise
// their object as closed.
func Unregister(s *Source) {
	if s == nil {
		return
	}
	regMu.Lock()
	defer regMu.Unlock()
	p := sources.Load()
	if p == nil {
		return
	}
	list := make([]*Source, 0, len(*p))
	for _, o := range *p {
		if o != s {
			list = append(list, o)
		}
	}
	sources.Store(&list)
}

// Registered is the number of registered sources.
func Registered() int {
	if p := sources.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// PollAll calls every registered poll function once. Blocked waits call
// it once they are past their spin budget; it is never on a hot path.
func PollAll() {
	p := sources.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		s.poll()
	}
}

// Excl is Guard for an object that one goroutine at a time may be inside
// (an endpoint its driver owns): Enter is one compare-and-swap, Exit a
// plain release store (internal/release), where Guard's counting costs
// two atomic read-modify-writes per call. A second goroutine that Enters
// (a Close from elsewhere) waits for the first to Exit, as it does for a
// foreign poll. The zero Excl is idle.
type Excl struct{ w uint64 }

// Excl states.
const (
	exclIdle    = 0
	exclOwner   = 1
	exclForeign = 2
)

// Enter takes the object for an owner goroutine, waiting while another
// goroutine is inside.
func (g *Excl) Enter() {
	if !atomic.CompareAndSwapUint64(&g.w, exclIdle, exclOwner) {
		g.waitEnter()
	}
}

//go:noinline
func (g *Excl) waitEnter() {
	for !atomic.CompareAndSwapUint64(&g.w, exclIdle, exclOwner) {
		runtime.Gosched()
	}
}

// Exit ends what Enter began.
func (g *Excl) Exit() { release.Store(&g.w, exclIdle) }

// Busy reports whether a goroutine (owner or foreign poller) is inside.
func (g *Excl) Busy() bool { return atomic.LoadUint64(&g.w) != exclIdle }

// TryForeign claims the object for one foreign poll if nobody is inside;
// a true result must be paired with EndForeign. It never waits.
func (g *Excl) TryForeign() bool {
	return atomic.LoadUint64(&g.w) == exclIdle && atomic.CompareAndSwapUint64(&g.w, exclIdle, exclForeign)
}

// EndForeign ends a poll that TryForeign began.
func (g *Excl) EndForeign() { release.Store(&g.w, exclIdle) }
