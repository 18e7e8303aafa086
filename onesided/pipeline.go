package onesided

import (
	"context"
	"fmt"
)

// Transport moves the tiles of a Pipeline between ranks. WindowTransport
// implements it with put-with-signal; other implementations (non-blocking
// tagged sends, for comparison) plug in the same way.
//
// The Pipeline calls a Transport from one goroutine.
type Transport interface {
	// Rank and Size describe the group the tiles are exchanged in.
	Rank() int
	Size() int
	// Prepare sizes sendSlots×Size() send buffers and recvSlots×Size()
	// receive buffers of tileBytes each, and resets the tile sequence so
	// that the first tile is 1. It is collective and returns once no rank
	// still uses an earlier configuration.
	Prepare(ctx context.Context, tileBytes, sendSlots, recvSlots int) error
	// SendBuf is send slot's buffer for peer (tileBytes long).
	SendBuf(slot, peer int) []byte
	// RecvBuf is receive slot's buffer holding data from peer.
	RecvBuf(slot, peer int) []byte
	// Expect announces that receive slot is free for tile seq from every
	// peer (a message transport posts its receives here).
	Expect(recvSlot int, seq uint64) error
	// Send starts moving the first n bytes of SendBuf(sendSlot, peer) into
	// peer's RecvBuf(recvSlot, Rank()), labelled as tile seq.
	Send(peer, sendSlot, recvSlot, n int, seq uint64) error
	// Wait returns once RecvBuf(recvSlot, peer) holds tile seq.
	Wait(ctx context.Context, peer, recvSlot int, seq uint64) error
	// SendDone returns once every Send from sendSlot is locally complete,
	// so the slot's buffers may be rewritten.
	SendDone(ctx context.Context, sendSlot int) error
}

// PipelineConfig is the shape of a tiled exchange: N iterations of a loop,
// each producing BytesPerIter bytes for every rank (itself included),
// grouped in tiles of K iterations with D tiles in flight.
type PipelineConfig struct {
	N            int // iterations of the tiled loop
	K            int // iterations per tile (the last tile has N%K when that is not 0)
	D            int // pipeline depth: tile t's data is awaited after tile t+D is computed
	BytesPerIter int // bytes one iteration produces for each destination rank
}

func (c PipelineConfig) validate() error {
	if c.N <= 0 || c.K <= 0 || c.D <= 0 || c.BytesPerIter <= 0 {
		return fmt.Errorf("onesided: pipeline N=%d K=%d D=%d BytesPerIter=%d: all must be > 0: %w",
			c.N, c.K, c.D, c.BytesPerIter, ErrInvalid)
	}
	return nil
}

// Tiles is the number of tiles, ceil(N/K).
func (c PipelineConfig) Tiles() int { return (c.N + c.K - 1) / c.K }

// Tile describes one tile: iterations [First, First+Count) of the loop.
type Tile struct {
	Index int // 0-based tile number within a Run
	First int // first iteration
	Count int // iterations in this tile (K, or the remainder for the last)
}

// ComputeFunc computes a tile and writes what each rank p must receive into
// out[p] (Count×BytesPerIter bytes; out[Rank()] goes to this rank).
type ComputeFunc func(t Tile, out [][]byte) error

// ConsumeFunc receives a tile: in[p] holds what rank p computed for this
// rank in its tile t. The buffers are reused after ConsumeFunc returns.
type ConsumeFunc func(t Tile, in [][]byte) error

// Pipeline is the tiled overlap engine: computation of later tiles
// overlaps the transfer of earlier ones. It keeps D+1 send buffers and 2D
// receive buffers per peer, so a tile's data is written into a receive slot
// only after its receiver has consumed the slot's previous tile.
type Pipeline struct {
	tr   Transport
	cfg  PipelineConfig
	seq  uint64 // last tile sequence number issued
	out  [][]byte
	in   [][]byte
	ring []Tile // tile of each in-flight sequence number, by seq % D
}

// NewPipeline prepares tr for cfg (collective) and returns the engine.
func NewPipeline(ctx context.Context, tr Transport, cfg PipelineConfig) (*Pipeline, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, fmt.Errorf("onesided: NewPipeline: nil transport: %w", ErrInvalid)
	}
	if err := tr.Prepare(ctx, cfg.K*cfg.BytesPerIter, cfg.D+1, 2*cfg.D); err != nil {
		return nil, fmt.Errorf("onesided: NewPipeline: %w", err)
	}
	p := &Pipeline{tr: tr, cfg: cfg,
		out:  make([][]byte, tr.Size()),
		in:   make([][]byte, tr.Size()),
		ring: make([]Tile, cfg.D),
	}
	for s := uint64(1); s <= uint64(2*cfg.D); s++ {
		if err := tr.Expect(int(s%uint64(2*cfg.D)), s); err != nil {
			return nil, fmt.Errorf("onesided: NewPipeline: %w", err)
		}
	}
	return p, nil
}

// Config returns the pipeline's shape.
func (p *Pipeline) Config() PipelineConfig {
	if p == nil {
		return PipelineConfig{}
	}
	return p.cfg
}

// Run executes one pass of the tiled loop: for each tile it calls compute,
// then consumes the tile from D tiles ago, then sends the new tile; at the
// end it consumes the last D tiles. Every rank must call Run the same
// number of times. Consume is called once per tile, in tile order.
func (p *Pipeline) Run(ctx context.Context, compute ComputeFunc, consume ConsumeFunc) error {
	if p == nil || p.tr == nil {
		return fmt.Errorf("onesided: Run of a nil pipeline: %w", ErrInvalid)
	}
	if compute == nil || consume == nil {
		return fmt.Errorf("onesided: pipeline Run: nil compute or consume function: %w", ErrInvalid)
	}
	cfg := p.cfg
	P, me := p.tr.Size(), p.tr.Rank()
	D := uint64(cfg.D)
	tiles := cfg.Tiles()
	first := p.seq + 1
	for i := 0; i < tiles; i++ {
		s := p.seq + 1
		t := Tile{Index: i, First: i * cfg.K, Count: min(cfg.K, cfg.N-i*cfg.K)}
		n := t.Count * cfg.BytesPerIter
		slot := int(s % (D + 1))
		if err := p.tr.SendDone(ctx, slot); err != nil {
			return fmt.Errorf("onesided: pipeline tile %d: send slot: %w", i, err)
		}
		for q := 0; q < P; q++ {
			p.out[q] = p.tr.SendBuf(slot, q)[:n]
		}
		if err := compute(t, p.out); err != nil {
			return fmt.Errorf("onesided: pipeline compute tile %d: %w", i, err)
		}
		if s >= first+D {
			if err := p.finish(ctx, s-D, consume); err != nil {
				return err
			}
		}
		p.ring[s%D] = t
		rs := int(s % (2 * D))
		for j := 1; j <= P; j++ { // others first, starting after me; myself last
			q := (me + j) % P
			if err := p.tr.Send(q, slot, rs, n, s); err != nil {
				return fmt.Errorf("onesided: pipeline send tile %d to %d: %w", i, q, err)
			}
		}
		p.seq = s
	}
	for s := max(first, p.seq+1-min(D, p.seq)); s <= p.seq; s++ {
		if err := p.finish(ctx, s, consume); err != nil {
			return err
		}
	}
	// Complete this rank's sends before returning: a transport may need
	// the caller's progress to finish them (a delivery-ordered signal is
	// only issued once its data is delivered), and the caller may compute
	// for a long time before it touches the transport again.
	for slot := 0; slot <= cfg.D; slot++ {
		if err := p.tr.SendDone(ctx, slot); err != nil {
			return fmt.Errorf("onesided: pipeline: completing sends: %w", err)
		}
	}
	return nil
}

// finish waits for tile seq from every rank, consumes it and re-arms the slot.
func (p *Pipeline) finish(ctx context.Context, seq uint64, consume ConsumeFunc) error {
	D := uint64(p.cfg.D)
	t := p.ring[seq%D]
	rs := int(seq % (2 * D))
	n := t.Count * p.cfg.BytesPerIter
	P, me := p.tr.Size(), p.tr.Rank()
	for j := 0; j < P; j++ {
		q := (me + P - j) % P
		if err := p.tr.Wait(ctx, q, rs, seq); err != nil {
			return fmt.Errorf("onesided: pipeline wait tile %d from %d: %w", t.Index, q, err)
		}
		p.in[q] = p.tr.RecvBuf(rs, q)[:n]
	}
	if err := consume(t, p.in); err != nil {
		return fmt.Errorf("onesided: pipeline consume tile %d: %w", t.Index, err)
	}
	return p.tr.Expect(rs, seq+2*D)
}
