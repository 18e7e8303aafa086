package endpoint

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

// MatchHeader reports whether w's own endpoint carries the match word in
// a header (matchhdr.go) rather than in remote CQ data.
func MatchHeader(w *World) bool {
	v := w.comm.v
	v.lock()
	defer v.unlock()
	return v.hdr
}

// ForceMatchHeader sets WEFT_TUNE's epmatchhdr for this process (before Init).
func ForceMatchHeader(on bool) { forceMatchHdr = on }
