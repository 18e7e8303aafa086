package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
	"github.com/weft-hpc/weft/test/bench/internal/eploop"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// Tags of the weft job's messages, as the MPI program's: the ping-pong,
// then the two layout checks and the hash's answer.
const (
	tagData   = 1
	tagPack   = 10
	tagHash   = 11
	tagUnpack = 12
)

// rankLimit bounds a rank that fabrun's own limit somehow did not end.
const rankLimit = time.Hour

// rankMain is one rank of the weft job, the counterpart of mpi/ddtpp.c
// with the same checks and output (rank 0 prints):
//
//	-role weft RECIPE ROUNDS
//
// Per case, after the checks, the three weft contenders run WARMUP untimed
// round trips each and then ITERS timed ones split into ROUNDS rounds, the
// contenders in a rotated order within each round; then both ranks time
// ITERS of the typed contender's pack and unpack passes alone (passes).
// Besides the SUM and RESULT lines (one per contender: typed, manual,
// contig; and pack and unpack, the passes' means) rank 0 prints "JIT
// state NAME SIZE compiled|interpreted": whether the case's type packed
// through compiled code by the end.
// profileEnv names the environment variable that makes each rank write a
// CPU profile (pprof) of its cases to the file named by its value plus
// ".RANK".
const profileEnv = "WEFT_DDTPP_CPUPROFILE"

func rankMain(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("%w: -role weft RECIPE ROUNDS", sidebyside.ErrUsage)
	}
	rounds, err := strconv.Atoi(args[1])
	if err != nil || rounds < 1 {
		return fmt.Errorf("%w: -role weft: ROUNDS %q: want a positive integer", sidebyside.ErrUsage, args[1])
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	rp, err := readRecipe(f)
	f.Close()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rankLimit)
	defer cancel()
	c, done, err := eploop.Pair(ctx, "the weft job")
	if err != nil {
		return err
	}
	defer done()
	if prefix := os.Getenv(profileEnv); prefix != "" {
		pf, err := os.Create(fmt.Sprintf("%s.%d", prefix, c.Rank()))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	for _, rc := range rp.cases {
		cs, err := ddtcases.Build(rc.name, rc.size)
		if err != nil {
			return err
		}
		if cs.Count != rc.count || cs.Typed != rc.typed || cs.Bytes != rc.bytes || cs.Type.Size() != rc.tsize || cs.Type.Extent() != rc.extent {
			return fmt.Errorf("%v: the recipe's case line does not describe this build's case", cs)
		}
		if err := runCase(ctx, c, cs, rc, rounds, stdout); err != nil {
			return fmt.Errorf("%v: %w", cs, err)
		}
	}
	return nil
}

// runCase checks one case's layout with the peer and runs its ping-pongs.
func runCase(ctx context.Context, c *endpoint.Comm, cs *ddtcases.Case, rc recipeCase, rounds int, stdout io.Writer) error {
	me := c.Rank()
	peer := 1 - me
	sb, rb := make([]byte, cs.Typed), make([]byte, cs.Typed)
	var hpack, hunpack uint64
	// 1. The packed stream, 2. the unpacked layout.
	if me == 0 {
		ddtcases.Fill(sb, 1)
		if err := c.SendTyped(ctx, sb, cs.Count, cs.Type, peer, tagPack); err != nil {
			return err
		}
		var hb [8]byte
		if _, err := c.Recv(ctx, hb[:], peer, tagHash); err != nil {
			return err
		}
		hpack = binary.LittleEndian.Uint64(hb[:])
		st, err := c.RecvTyped(ctx, rb, cs.Count, cs.Type, peer, tagUnpack)
		if err != nil {
			return err
		}
		if int64(st.Count) != cs.Bytes {
			return fmt.Errorf("layout check: received %d bytes, want %d", st.Count, cs.Bytes)
		}
		hunpack = hash(rb)
		clear(rb)
	} else {
		stream := make([]byte, cs.Bytes)
		st, err := c.Recv(ctx, stream, peer, tagPack)
		if err != nil {
			return err
		}
		if int64(st.Count) != cs.Bytes {
			return fmt.Errorf("layout check: received %d bytes, want %d", st.Count, cs.Bytes)
		}
		if err := c.Send(ctx, binary.LittleEndian.AppendUint64(nil, hash(stream)), peer, tagHash); err != nil {
			return err
		}
		ddtcases.Fill(stream, 2)
		if err := c.Send(ctx, stream, peer, tagUnpack); err != nil {
			return err
		}
	}

	// 3. The contenders. Rank 0 sends from sb and receives into rb; rank 1
	// receives into rb and sends it back. manual packs through its own
	// buffers, contig sends bytes of its own.
	var loops [3]func(n int) error
	loops[0] = func(n int) error { // typed
		for range n {
			if me == 0 {
				if err := c.SendTyped(ctx, sb, cs.Count, cs.Type, peer, tagData); err != nil {
					return err
				}
				if _, err := c.RecvTyped(ctx, rb, cs.Count, cs.Type, peer, tagData); err != nil {
					return err
				}
			} else {
				if _, err := c.RecvTyped(ctx, rb, cs.Count, cs.Type, peer, tagData); err != nil {
					return err
				}
				if err := c.SendTyped(ctx, rb, cs.Count, cs.Type, peer, tagData); err != nil {
					return err
				}
			}
		}
		return nil
	}
	ps, pr := make([]byte, cs.Bytes), make([]byte, cs.Bytes)
	packS, _ := cs.Bind(ps, sb)
	packR, unpackR := cs.Bind(pr, rb)
	loops[1] = func(n int) error { // manual
		for range n {
			if me == 0 {
				packS()
				if err := c.Send(ctx, ps, peer, tagData); err != nil {
					return err
				}
				if _, err := c.Recv(ctx, pr, peer, tagData); err != nil {
					return err
				}
				unpackR()
			} else {
				if _, err := c.Recv(ctx, pr, peer, tagData); err != nil {
					return err
				}
				unpackR()
				packR()
				if err := c.Send(ctx, pr, peer, tagData); err != nil {
					return err
				}
			}
		}
		return nil
	}
	cs0, cr := make([]byte, cs.Bytes), make([]byte, cs.Bytes)
	ddtcases.Fill(cs0, 3)
	loops[2] = func(n int) error { // contig
		for range n {
			if me == 0 {
				if err := c.Send(ctx, cs0, peer, tagData); err != nil {
					return err
				}
				if _, err := c.Recv(ctx, cr, peer, tagData); err != nil {
					return err
				}
			} else {
				if _, err := c.Recv(ctx, cr, peer, tagData); err != nil {
					return err
				}
				if err := c.Send(ctx, cr, peer, tagData); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	for i, l := range loops {
		if err := l(rc.warmup); err != nil {
			return fmt.Errorf("%s warm-up: %w", weftCols[i], err)
		}
	}
	var el [3]time.Duration
	order := []int{0, 1, 2}
	for r := range rounds {
		n := rc.iters*(r+1)/rounds - rc.iters*r/rounds
		for _, i := range mpijob.Rotate(order, r) {
			t0 := time.Now()
			if err := loops[i](n); err != nil {
				return fmt.Errorf("%s: %w", weftCols[i], err)
			}
			el[i] += time.Since(t0)
		}
	}
	// 4. The passes alone (the packing floor): each rank packs and unpacks
	// as in the typed ping-pong, both ranks at once, with no message.
	pk, upk, err := passes(ctx, c, cs, sb, rb, ps, pr, rc.iters)
	if err != nil {
		return fmt.Errorf("passes: %w", err)
	}
	if me != 0 {
		return nil
	}
	// What came back packs to what was sent.
	want, got := make([]byte, cs.Bytes), make([]byte, cs.Bytes)
	if _, err := cs.Type.Pack(want, sb, cs.Count); err != nil {
		return err
	}
	if _, err := cs.Type.Pack(got, rb, cs.Count); err != nil {
		return err
	}
	if !bytes.Equal(want, got) || !bytes.Equal(cs0, cr) {
		return fmt.Errorf("the ping-pong did not bring the data back")
	}
	fmt.Fprintf(stdout, "SUM pack %s %s %016x\nSUM unpack %s %s %016x\n", rc.name, rc.size, hpack, rc.name, rc.size, hunpack)
	for i, col := range weftCols {
		fmt.Fprintf(stdout, "RESULT %s %s %s %.4f\n", col, rc.name, rc.size, el[i].Seconds()*1e6/float64(2*rc.iters))
	}
	fmt.Fprintf(stdout, "RESULT pack %s %s %.4f\nRESULT unpack %s %s %.4f\n", rc.name, rc.size, pk, rc.name, rc.size, upk)
	state := "interpreted"
	if cs.Type.Compiled() {
		state = "compiled"
	}
	fmt.Fprintf(stdout, "JIT state %s %s %s\n", rc.name, rc.size, state)
	return nil
}

// passes times the datatype engine's passes of the typed ping-pong
// without the messages: n times, rank 0 packs sb into ps and unpacks pr
// into rb, rank 1 unpacks pr into rb and packs rb into ps, both ranks at
// once (after a barrier), so that each core and cache is as busy as in
// the ping-pong. It returns, on rank 0, the mean pack and unpack in µs,
// each the slower rank's: a pipelined typed send can at best overlap
// the sender's pack with the receiver's unpack, so the larger of the two
// is the least a typed half round trip of this engine can take.
func passes(ctx context.Context, c *endpoint.Comm, cs *ddtcases.Case, sb, rb, ps, pr []byte, n int) (pack, unpack float64, err error) {
	if err := c.Barrier(ctx); err != nil {
		return 0, 0, err
	}
	var tp, tu time.Duration
	doPack := func(src []byte) error {
		t0 := time.Now()
		_, err := cs.Type.Pack(ps, src, cs.Count)
		tp += time.Since(t0)
		return err
	}
	doUnpack := func() error {
		t0 := time.Now()
		_, err := cs.Type.Unpack(rb, pr, cs.Count)
		tu += time.Since(t0)
		return err
	}
	for range n {
		if c.Rank() == 0 {
			err = errors.Join(doPack(sb), doUnpack())
		} else {
			err = errors.Join(doUnpack(), doPack(rb))
		}
		if err != nil {
			return 0, 0, err
		}
	}
	mine := [2]float64{tp.Seconds() * 1e6 / float64(n), tu.Seconds() * 1e6 / float64(n)}
	var b [16]byte
	if c.Rank() == 1 {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(mine[0]))
		binary.LittleEndian.PutUint64(b[8:], math.Float64bits(mine[1]))
		return 0, 0, c.Send(ctx, b[:], 0, tagHash)
	}
	if _, err := c.Recv(ctx, b[:], 1, tagHash); err != nil {
		return 0, 0, err
	}
	return max(mine[0], math.Float64frombits(binary.LittleEndian.Uint64(b[:]))),
		max(mine[1], math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))), nil
}
