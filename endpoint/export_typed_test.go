package endpoint

// SetPipePieceHook has f run after each piece a pipelined node-transport
// typed send has packed (off bytes of n); nil removes it. Set it before
// the first send.
func SetPipePieceHook(f func(off, n int)) { pipePieceHook = f }

// SentEagerly reports whether send request r went eagerly (not by
// rendezvous).
func SentEagerly(r *Request) bool { return r.kind == kSendEager }

// EagerLimit is the eager limit of c's endpoint.
func EagerLimit(c *Comm) int { return c.v.eagerLimit }
