// Package eploop holds the measurement loops that the bench tools run on
// weft's endpoint package (test/bench/endpoint, test/bench/p2p): a
// blocking ping-pong and one side of a windowed message stream, the same
// code for every tool so that their figures measure the same thing; and
// the two-rank job with a private endpoint handle that the ping-pongs of
// test/bench/p2p and test/bench/ddtpp run on.
package eploop

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// Tags of the loops' messages: data, and the acknowledgement that closes
// a window.
const (
	DataTag = 1
	AckTag  = 2
)

// Pair joins the weft job (endpoint.Init), which must have exactly two
// ranks (what names the job in the error saying otherwise), and creates a
// private endpoint handle of this rank (CreateEndpoints(1)), then warms
// this rank's core (sidebyside.WarmCore). done frees the handle and
// leaves the job.
func Pair(ctx context.Context, what string) (c *endpoint.Comm, done func(), err error) {
	w, err := endpoint.Init(ctx)
	if err != nil {
		return nil, nil, err
	}
	if n := w.Comm().Size(); n != 2 {
		w.Close()
		return nil, nil, fmt.Errorf("%s needs exactly 2 ranks, got %d", what, n)
	}
	eps, err := w.Comm().CreateEndpoints(ctx, 1)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	c = eps[0]
	sidebyside.WarmCore()
	return c, func() {
		c.Free()
		w.Close()
	}, nil
}

// PingPong runs n round trips between c's rank and peer with blocking
// Send and Recv of len(sb)-byte messages (received into rb): when first,
// this side sends and then receives, otherwise it receives and answers.
// It returns the elapsed time; the half round trip is elapsed / (2n).
func PingPong(ctx context.Context, c *endpoint.Comm, peer int, first bool, sb, rb []byte, n int) (time.Duration, error) {
	start := time.Now()
	for range n {
		if first {
			if err := c.Send(ctx, sb, peer, DataTag); err != nil {
				return 0, err
			}
			if _, err := c.Recv(ctx, rb, peer, DataTag); err != nil {
				return 0, err
			}
		} else {
			if _, err := c.Recv(ctx, rb, peer, DataTag); err != nil {
				return 0, err
			}
			if err := c.Send(ctx, sb, peer, DataTag); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// Stream is one side of a windowed message stream between c's rank and
// peer, the pattern of OSU's osu_mbw_mr: per window the sender starts
// Window Isends of one message and completes them with one WaitAll, then
// receives an acknowledgement; the receiver starts Window Irecvs into
// distinct buffers, completes them with one WaitAll and sends the
// acknowledgement.
//
// With Batch set, the sender starts each window's sends with one
// Comm.IsendBatch instead of one Isend per message.
type Stream struct {
	// Batch: the sender posts a window with one IsendBatch.
	Batch bool

	c      *endpoint.Comm
	peer   int
	sender bool
	msg    []byte
	bufs   [][]byte
	ack    []byte
	reqs   []*endpoint.Request
	batch  []endpoint.Msg
}

// NewStream prepares one side of a stream of size-byte messages, window
// messages per window, acknowledged with ackSize bytes.
func NewStream(c *endpoint.Comm, peer int, sender bool, window, size, ackSize int) *Stream {
	s := &Stream{c: c, peer: peer, sender: sender, msg: make([]byte, size), ack: make([]byte, ackSize),
		reqs: make([]*endpoint.Request, window)}
	if !sender {
		s.bufs = make([][]byte, window)
		for k := range s.bufs {
			s.bufs[k] = make([]byte, size)
		}
	}
	return s
}

// Window runs one window.
func (s *Stream) Window(ctx context.Context) error {
	if s.sender && s.Batch {
		if s.batch == nil {
			s.batch = make([]endpoint.Msg, len(s.reqs))
			for k := range s.batch {
				s.batch[k] = endpoint.Msg{Buf: s.msg, Dest: s.peer, Tag: DataTag}
			}
		}
		var err error
		if s.reqs, err = s.c.IsendBatch(s.reqs[:0], s.batch); err != nil {
			return err
		}
		return s.finish(ctx)
	}
	for k := range s.reqs {
		var r *endpoint.Request
		var err error
		if s.sender {
			r, err = s.c.Isend(s.msg, s.peer, DataTag)
		} else {
			r, err = s.c.Irecv(s.bufs[k], s.peer, DataTag)
		}
		if err != nil {
			return err
		}
		s.reqs[k] = r
	}
	return s.finish(ctx)
}

// finish completes a window whose requests are started.
func (s *Stream) finish(ctx context.Context) error {
	if err := endpoint.WaitAll(ctx, s.reqs...); err != nil {
		return err
	}
	if err := endpoint.ReleaseAll(s.reqs...); err != nil { // as MPI_Waitall frees the requests
		return err
	}
	if s.sender {
		_, err := s.c.Recv(ctx, s.ack, s.peer, AckTag)
		return err
	}
	return s.c.Send(ctx, s.ack, s.peer, AckTag)
}
