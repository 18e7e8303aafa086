package endpoint

// Endpoints of one communicator in one process.
//
// The handles CreateEndpoints returns are endpoints of one communicator,
// and several of them live in this process. libfabric's shm provider
// reaches an endpoint of the same process through its owner's own mapping
// of the endpoint's region (it finds the name among this process's
// endpoints instead of mapping the region again), and closing the endpoint
// unmaps it. A handle of the same process that then sends to the closed
// one, reads a rendezvous buffer through it, or reads a completion that
// points into its region, crashes the process (across processes a peer
// keeps its own mapping and its operations only fail or time out).
//
// So the endpoints created for one communicator in this process form a
// set: a freed handle whose endpoint other open members may still reach is
// parked — unusable (the handle is freed), but its libfabric objects, and
// the user buffers pinned for its rendezvous sends, stay until the last
// member of the set is released, which closes them all. World.Close closes
// everything at once.

import (
	"slices"
	"sync"
)

// vciSet is the set of endpoints (vcis) created in this process for one
// communicator.
type vciSet struct {
	mu     sync.Mutex
	open   int    // members not released yet
	parked []*vci // released members waiting for the others
}

// joinSet adds v to the set of the communicator with context id id.
func (w *World) joinSet(id int, v *vci) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sets == nil {
		w.sets = map[int]*vciSet{}
	}
	s := w.sets[id]
	if s == nil {
		s = &vciSet{}
		w.sets[id] = s
	}
	s.mu.Lock()
	s.open++
	s.mu.Unlock()
	v.set, v.setID, v.w = s, id, w
}

// leave records that v has been released. It reports whether v must be
// parked (other members are open); otherwise it returns the parked
// members, which the caller closes, and forgets the set.
func (s *vciSet) leave(v *vci) (park bool, others []*vci) {
	s.mu.Lock()
	s.open--
	if s.open > 0 {
		s.parked = append(s.parked, v)
		s.mu.Unlock()
		return true, nil
	}
	others, s.parked = s.parked, nil
	s.mu.Unlock()
	w := v.w
	w.mu.Lock()
	if w.sets[v.setID] == s {
		delete(w.sets, v.setID)
	}
	w.mu.Unlock()
	return false, others
}

// parkedEndpoints reports how many released endpoints of w wait for the
// other members of their set (tests).
func (w *World) parkedEndpoints() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.sets {
		s.mu.Lock()
		n += len(s.parked)
		s.mu.Unlock()
	}
	return n
}

// forget removes closed endpoints from the list World.Close closes, so
// that a program creating and freeing endpoints over and over does not
// keep every one of them until Close.
func (w *World) forget(vs []*vci) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range vs {
		if i := slices.Index(w.vcis, v); i >= 0 {
			w.vcis = slices.Delete(w.vcis, i, i+1)
		}
	}
}

// vciCount reports how many endpoints World.Close would close (tests).
func (w *World) vciCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.vcis)
}
