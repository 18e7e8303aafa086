package endpoint

import "context"

// Issend starts a synchronous send of buf to rank dest with tag
// (MPI_Issend): the request completes only once a receive has matched
// the message and taken its data, whatever its size, never on the
// sender's side alone. Of use for termination detection (a sparse
// exchange whose sends are all matched once they complete, with an
// Ibarrier: the NBX algorithm) and to find sends a program relies on
// being buffered. Every size goes by the rendezvous protocol of the
// peer's transport, so a small synchronous send costs a round trip more
// than Isend. buf must not be modified until the request completes. dest
// may be ProcNull.
func (c *Comm) Issend(buf []byte, dest, tag int) (*Request, error) {
	if err := c.usable("synchronous send"); err != nil {
		return nil, err
	}
	if dest == ProcNull {
		return completedRequest, nil
	}
	return c.isendSync(buf, dest, tag, c.ctx, 0, false, true)
}

// Ssend sends buf to rank dest synchronously (MPI_Ssend): it returns once
// a receive has matched the message and taken its data (see Issend), or
// ctx ends.
func (c *Comm) Ssend(ctx context.Context, buf []byte, dest, tag int) error {
	r, err := c.Issend(buf, dest, tag)
	return sendWait(ctx, r, err)
}
