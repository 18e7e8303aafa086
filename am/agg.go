package am

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/endpoint"
)

// Aggregation (WithAggregation): small messages bound for one rank are
// packed as records into a batch, one message of the communicator; the
// target unpacks them into the engine's record queue, which every Poll,
// at any nesting depth, serves before the inbox, so handlers still start
// in send order.

// recHdr is a record's header in a batch: handler id, header length and
// payload length (u32 each).
const recHdr = 12

// flagBatch marks a batch of records (the tag's low bits are unused).
const flagBatch = 1 << 18

// WithAggregation makes Send and Isend pack messages of at most n/4 bytes
// (a 12-byte record header, the header and the payload) bound for one
// rank into batches of up to n bytes, each sent as one message when it is
// full, when this rank polls (Poll, Serve, and every wait of the engine),
// on Flush, or before any other message to that rank (a call, a reply, a
// larger message), so that handlers still start in send order. A batched
// message is thus cheaper, but leaves only when this rank next polls or
// flushes: a rank that sends and then blocks elsewhere must Flush first.
// n between 64 and 1 MiB; 0 turns aggregation off (the default). Ranks
// need not agree.
func WithAggregation(n int) Option {
	return func(c *config) error {
		if n != 0 && (n < 64 || n > 1<<20) {
			return fmt.Errorf("am: aggregation of %d bytes outside 64..%d: %w", n, 1<<20, ErrInvalid)
		}
		c.agg = n
		return nil
	}
}

// aggregator holds the batches a rank is filling and those in flight.
type aggregator struct {
	limit   int // batch size; 0: off
	mu      sync.Mutex
	bufs    [][]byte // per destination: the records not yet sent
	dirty   []int    // destinations with records
	flying  []flight // batches sent but not yet complete
	spare   [][]byte
	pending atomic.Int32 // len(dirty) + len(flying), read without mu
}

type flight struct {
	r *endpoint.Request
	b []byte
}

// batchable reports whether a message of header h and payload p to dest
// goes into a batch.
func (e *Engine) batchable(dest int, token uint32, h, p []byte) bool {
	a := &e.agg
	return a.limit > 0 && token == 0 && dest != e.rank && recHdr+len(h)+len(p) <= a.limit/4
}

// batch appends a record to dest's batch, sending the batch first when
// the record does not fit.
func (e *Engine) batch(dest, id int, h, p []byte) error {
	a := &e.agg
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bufs == nil {
		a.bufs = make([][]byte, e.size)
	}
	b := a.bufs[dest]
	if len(b)+recHdr+len(h)+len(p) > a.limit {
		if err := e.sendBatch(dest); err != nil {
			return err
		}
		b = a.bufs[dest]
	}
	if len(b) == 0 {
		if b == nil {
			if k := len(a.spare); k > 0 {
				b, a.spare = a.spare[k-1][:0], a.spare[:k-1]
			} else {
				b = make([]byte, 0, a.limit)
			}
		}
		a.dirty = append(a.dirty, dest)
		a.pending.Add(1)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(id))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
	b = append(append(b, h...), p...)
	a.bufs[dest] = b
	e.sent[dest].Add(1)
	return nil
}

// sendBatch sends dest's batch, if it has one. Caller holds a.mu.
func (e *Engine) sendBatch(dest int) error {
	a := &e.agg
	if a.bufs == nil || len(a.bufs[dest]) == 0 {
		return nil
	}
	b := a.bufs[dest]
	for i, d := range a.dirty {
		if d == dest {
			a.dirty[i] = a.dirty[len(a.dirty)-1]
			a.dirty = a.dirty[:len(a.dirty)-1]
			a.pending.Add(-1)
			break
		}
	}
	r, err := e.req.Isend(b, dest, flagBatch)
	if err != nil {
		a.bufs[dest] = b[:0]
		return fmt.Errorf("am: send a batch to rank %d: %w", dest, err)
	}
	if ok, err := over(r); ok { // copied out: the buffer is free again
		a.bufs[dest] = b[:0]
		if err != nil {
			return fmt.Errorf("am: send a batch to rank %d: %w", dest, err)
		}
		return nil
	}
	a.flying = append(a.flying, flight{r, b})
	a.pending.Add(1)
	a.bufs[dest] = nil
	return nil
}

// flushTo sends dest's batch before another message to dest.
func (e *Engine) flushTo(dest int) error {
	a := &e.agg
	if a.limit == 0 || a.pending.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return e.sendBatch(dest)
}

// flushAll sends every batch and collects the buffers of those sent
// before that have completed.
func (e *Engine) flushAll() error {
	a := &e.agg
	if a.pending.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var err error
	for len(a.dirty) > 0 {
		if serr := e.sendBatch(a.dirty[0]); serr != nil && err == nil {
			err = serr
		}
	}
	k := 0
	for _, f := range a.flying {
		ok, ferr := over(f.r)
		if !ok {
			a.flying[k] = f
			k++
			continue
		}
		a.spare = append(a.spare, f.b)
		a.pending.Add(-1)
		if ferr != nil && err == nil {
			err = fmt.Errorf("am: send a batch: %w", ferr)
		}
	}
	clear(a.flying[k:])
	a.flying = a.flying[:k]
	return err
}

// Flush sends every batch this rank has filled (WithAggregation) without
// waiting for them to be handled; Quiesce waits for that. Without
// aggregation it does nothing.
func (e *Engine) Flush() error {
	if err := e.usable("flush"); err != nil {
		return err
	}
	return e.flushAll()
}

// nextRecord moves the next record of the batch being unpacked into f
// and reports whether there was one.
func (e *Engine) nextRecord(f *frame) (bool, error) {
	rest := e.recs
	if len(rest) == 0 {
		return false, nil
	}
	if len(rest) < recHdr {
		e.recs = nil
		return false, fmt.Errorf("am: malformed batch from rank %d: %w", e.recSrc, ErrInvalid)
	}
	id := int(binary.LittleEndian.Uint32(rest))
	hl := int(binary.LittleEndian.Uint32(rest[4:]))
	pl := int(binary.LittleEndian.Uint32(rest[8:]))
	if hl > len(rest)-recHdr || pl > len(rest)-recHdr-hl || id > MaxHandler {
		e.recs = nil
		return false, fmt.Errorf("am: malformed batch from rank %d: %w", e.recSrc, ErrInvalid)
	}
	n := hl + pl
	// The frame's own copy: a nested Poll may take the next records.
	f.rbuf = append(f.rbuf[:0], rest[recHdr:recHdr+n]...)
	e.recs = rest[recHdr+n:]
	f.msg = Msg{e: e, f: f, src: e.recSrc, id: id, header: f.rbuf[:hl], payload: f.rbuf[hl:n], plen: pl}
	return true, nil
}

// takeBatch receives batch message mm into the engine's record queue
// (empty: the poll loop serves it first).
func (e *Engine) takeBatch(f *frame, mm *endpoint.Message) error {
	st := mm.Status()
	if cap(e.recBuf) < st.Count {
		e.recBuf = make([]byte, st.Count)
	}
	b := e.recBuf[:st.Count]
	if _, err := mm.Mrecv(f.hctx.Context, b); err != nil {
		return fmt.Errorf("am: receive a batch from rank %d: %w", st.Source, err)
	}
	e.recs, e.recSrc = b, st.Source
	e.batchesIn++
	return nil
}
