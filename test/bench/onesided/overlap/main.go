// Command overlap reproduces the overlap study of the tiling seed paper on
// an FFT-like transpose: every rank owns N rows of L complex numbers, runs
// an in-place radix-2 FFT on each row (-work times, to set the
// compute/communication ratio), and sends column block p of every row to
// rank p (a distributed transpose). Schemes, timed side by side:
//
//	compute   the computation alone (the normalisation base)
//	comm      the exchange alone (T_cm)
//	alltoall  (i) compute every row, then exchange everything with
//	          non-blocking tagged sends and receives (endpoint.Comm)
//	isend     (ii) tiles of K rows sent with Isend/Irecv while later tiles
//	          compute, D tiles in flight (onesided.Pipeline over a message
//	          transport on endpoint.Comm)
//	put       (iii) the same tiles with flag-polled puts
//	          (onesided.Pipeline over onesided.WindowTransport: direct
//	          stores between ranks of one node)
//	put-net   (iii) through libfabric RMA (WEFT_ONESIDED_SHM=off)
//	coll      (iii) through collectives.TiledAlltoall (each row
//	          transformed out of place, so that its tuner may repeat tiles)
//	coll-alltoall  (i) with collectives.Alltoall
//
// K and D for the tiled schemes come from onesided.Tune (-k and -d set
// them). With -tunecheck the tool instead times TiledAlltoall.Tune's
// guided search three times, the old search (every K from 4 to N/2 × D
// 1..3, one run each) and an exhaustive sweep (-tunetrials runs per
// shape), then runs the shapes they chose side by side, -reps times, and
// prints each one's time and its median ratio to the sweep's choice. Times are
// normalised to compute, as the seed's figures are; efficiency is
// max(T_cp, T_cm) / T, the fraction of the ideal overlap reached, where a
// tiled scheme's T_cm is the same pipeline run with the FFTs left out
// (packing and transfers only) and alltoall's is the comm row.
// Every tiled result is checked against the alltoall result.
//
// Usage (from the repository root):
//
//	go run ./test/bench/onesided/overlap -np 2 -rows 512 -len 1024 -work 2 -reps 5
//
// With -json rank 0 prints, instead of the table, one JSON object per
// scheme and metric (the schema is benchrec.Record in record.go): case is the
// scheme, size "<rows>x<len>-w<work>", metric t (ms, the slowest rank's
// median), norm (T / T_compute) and, for the overlapped schemes,
// efficiency (max(T_cp, T_cm) / T).
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/fft"
	"github.com/weft-hpc/weft/internal/launch"
	"github.com/weft-hpc/weft/onesided"
)

func env(name, def string) string {
	if v := os.Getenv("WEFT_BENCH_" + name); v != "" {
		return v
	}
	return def
}

func atoi(s string) int { v, _ := strconv.Atoi(s); return v }

var (
	role       = flag.String("role", "", "internal: rank")
	np         = flag.Int("np", atoi(env("NP", "2")), "ranks")
	rows       = flag.Int("rows", atoi(env("ROWS", "512")), "rows (loop iterations) per rank")
	rowLen     = flag.Int("len", atoi(env("LEN", "1024")), "complex numbers per row (power of two, multiple of np)")
	work       = flag.Int("work", atoi(env("WORK", "2")), "FFTs per row (compute weight)")
	reps       = flag.Int("reps", atoi(env("REPS", "5")), "timed repetitions per scheme; medians reported")
	schemes    = flag.String("schemes", env("SCHEMES", "compute,comm,alltoall,isend,put,put-net,coll,coll-alltoall"), "schemes to run")
	kFlag      = flag.Int("k", 0, "tile size (0: autotune)")
	dFlag      = flag.Int("d", 0, "depth (0: autotune)")
	tuneChk    = flag.Bool("tunecheck", false, "time the guided tuner, the old search and an exhaustive sweep of TiledAlltoall's shapes, then their choices side by side")
	tuneTrials = flag.Int("tunetrials", 3, "-tunecheck: timed runs per shape in the exhaustive sweep")
	jsonOut    = flag.Bool("json", env("JSON", "") == "1", "print one JSON object per result line instead of the table")
)

func main() {
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "overlap: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *np < 1 || *rows < 1 || *rowLen < 1 || *work < 0 || *reps < 1 {
		fmt.Fprintf(os.Stderr, "overlap: -np, -rows, -len and -reps want ≥ 1, -work ≥ 0\n")
		os.Exit(2)
	}
	if *role == "rank" {
		if err := rank(); err != nil {
			fmt.Fprintln(os.Stderr, "overlap rank:", err)
			os.Exit(1)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	args := append([]string{self, "-role", "rank"}, os.Args[1:]...)
	err = launch.Run(context.Background(), launch.Config{NP: *np, Launcher: "local", Argv: args,
		Provider: "shm", Timeout: 10 * time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, "overlap:", err)
		os.Exit(1)
	}
}

type job struct {
	c        *endpoint.Comm
	P, me    int
	N, L, C  int // rows, row length, columns per peer
	bpi      int // bytes per row per peer
	data     [][]complex128
	result   [][]byte // result[p]: what rank p sent us, N*bpi bytes
	twiddles []complex128
	cl       *collectives.Coll // for the coll schemes, made on first use
}

func (j *job) computeRow(r int) {
	row := j.data[r]
	for w := 0; w < *work; w++ {
		fft.Forward(row, j.twiddles)
	}
}

// out[p] receives columns [p*C, (p+1)*C) of rows first..first+count-1.
func (j *job) pack(first, count int, out [][]byte) {
	for p := 0; p < j.P; p++ {
		dst := out[p]
		for i := 0; i < count; i++ {
			src := j.data[first+i][p*j.C : (p+1)*j.C]
			copy(dst[i*j.bpi:(i+1)*j.bpi], unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), j.bpi))
		}
	}
}

func (j *job) reset() {
	for r := range j.data {
		for i := range j.data[r] {
			j.data[r][i] = complex(float64((r*7+i*3+j.me)%17), float64(i%5))
		}
	}
}

func rank() error {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	c := w.Comm()
	P := c.Size()
	if *rowLen%P != 0 || *rowLen&(*rowLen-1) != 0 {
		return fmt.Errorf("-len %d must be a power of two and a multiple of %d", *rowLen, P)
	}
	j := &job{c: c, P: P, me: c.Rank(), N: *rows, L: *rowLen, C: *rowLen / P}
	j.bpi = j.C * 16
	j.data = make([][]complex128, j.N)
	for r := range j.data {
		j.data[r] = make([]complex128, j.L)
	}
	j.twiddles = fft.Twiddles(j.L)
	j.result = make([][]byte, P)
	for p := range j.result {
		j.result[p] = make([]byte, j.N*j.bpi)
	}
	times := map[string][]time.Duration{}
	chosen := map[string]string{}
	var reference [][]byte
	// Every scheme is registered first (tiled ones autotuned), then the
	// repetitions run the schemes interleaved, so that machine load hits
	// them alike; the first round is an untimed warm-up.
	type run struct {
		name  string
		fn    func() error
		check bool // compare the result with the alltoall result
	}
	var runs []run
	timeit := func(name string, fn func() error) error {
		runs = append(runs, run{name: name, fn: fn, check: name != "compute" && name != "comm" && name != "alltoall" && !strings.HasSuffix(name, "/comm")})
		return nil
	}
	check := func(name string) error {
		if reference == nil {
			return nil
		}
		for p := range reference {
			if string(reference[p]) != string(j.result[p]) {
				return fmt.Errorf("%s: data from rank %d differs from the alltoall result", name, p)
			}
		}
		return nil
	}
	full := make([][]byte, P)
	for p := range full {
		full[p] = make([]byte, j.N*j.bpi)
	}
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	if *tuneChk {
		return tuneCheck(ctx, j)
	}
	for _, s := range strings.Split(*schemes, ",") {
		switch s {
		case "compute":
			err = timeit(s, func() error {
				for r := 0; r < j.N; r++ {
					j.computeRow(r)
				}
				return nil
			})
		case "comm":
			err = timeit(s, func() error { j.pack(0, j.N, full); return j.alltoall(ctx, full) })
		case "alltoall":
			err = timeit(s, func() error {
				for r := 0; r < j.N; r++ {
					j.computeRow(r)
				}
				j.pack(0, j.N, full)
				if err := j.alltoall(ctx, full); err != nil {
					return err
				}
				if reference == nil {
					reference = make([][]byte, P)
					for p := range reference {
						reference[p] = append([]byte(nil), j.result[p]...)
					}
				}
				return nil
			})
		case "coll":
			a, how, err2 := j.newTiled(ctx, true)
			if err2 != nil {
				return err2
			}
			closers = append(closers, func() error { return a.Free(ctx) })
			chosen[s] = how
			compute, packOnly, consume := j.tiledFuncs()
			_ = timeit(s, func() error { return a.Run(ctx, compute, consume) })
			err = timeit(s+"/comm", func() error { return a.Run(ctx, packOnly, consume) })
		case "coll-alltoall":
			var fn func() error
			if fn, err = j.collPlain(ctx); err == nil {
				err = timeit(s, fn)
			}
		case "isend", "put", "put-net":
			var tr onesided.Transport
			switch s {
			case "isend":
				tr = &msgTransport{c: c}
			case "put":
				wt := onesided.NewWindowTransport(c, onesided.WithSharedMemory(onesided.ShmAuto))
				tr = wt
				closers = append(closers, func() error { return wt.Close(ctx) })
			case "put-net":
				wt := onesided.NewWindowTransport(c, onesided.WithSharedMemory(onesided.ShmOff), onesided.WithProvider("shm"))
				tr = wt
				closers = append(closers, func() error { return wt.Close(ctx) })
			}
			compute := func(t onesided.Tile, out [][]byte) error {
				for r := t.First; r < t.First+t.Count; r++ {
					j.computeRow(r)
				}
				j.pack(t.First, t.Count, out)
				return nil
			}
			consume := func(t onesided.Tile, in [][]byte) error {
				for p := range in {
					copy(j.result[p][t.First*j.bpi:], in[p])
				}
				return nil
			}
			cfg := onesided.PipelineConfig{N: j.N, K: *kFlag, D: *dFlag, BytesPerIter: j.bpi}
			if cfg.K == 0 || cfg.D == 0 {
				res, err := onesided.Tune(ctx, c, tr, onesided.TuneConfig{N: j.N, BytesPerIter: j.bpi}, compute, consume)
				if err != nil {
					return fmt.Errorf("%s autotune: %w", s, err)
				}
				cfg = res.Config
				if j.me == 0 && !*jsonOut {
					fmt.Fprintf(os.Stderr, "%s: autotune chose K=%d D=%d in %v (%d runs)\n", s, cfg.K, cfg.D, res.Elapsed.Round(time.Millisecond), res.Runs)
				}
			}
			chosen[s] = fmt.Sprintf("K=%d D=%d", cfg.K, cfg.D)
			p, err2 := onesided.NewPipeline(ctx, tr, cfg)
			if err2 != nil {
				return err2
			}
			_ = timeit(s, func() error { return p.Run(ctx, compute, consume) })
			// The same pipeline without the FFTs: this scheme's T_cm.
			packOnly := func(t onesided.Tile, out [][]byte) error { j.pack(t.First, t.Count, out); return nil }
			err = timeit(s+"/comm", func() error { return p.Run(ctx, packOnly, consume) })
		default:
			err = fmt.Errorf("unknown scheme %q", s)
		}
		if err != nil {
			return err
		}
	}
	if j.cl != nil {
		closers = append(closers, j.cl.Free) // after the TiledAlltoall's Free
	}
	for rep := -1; rep < *reps; rep++ {
		for _, r := range runs {
			j.reset()
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			t0 := time.Now()
			if err := r.fn(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			el := time.Since(t0)
			if r.check {
				if err := check(r.name); err != nil {
					return err
				}
			}
			worst, err := j.slowest(ctx, el)
			if err != nil {
				return err
			}
			if rep >= 0 {
				times[r.name] = append(times[r.name], worst)
			}
		}
	}
	if j.me != 0 {
		return nil
	}
	med := func(name string) time.Duration {
		d := append([]time.Duration(nil), times[name]...)
		if len(d) == 0 {
			return 0
		}
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		return d[len(d)/2]
	}
	tcp, tcm := med("compute"), med("comm")
	if *jsonOut {
		return benchrec.Write(os.Stdout, overlapRecords(strings.Split(*schemes, ","), med, tcp, tcm, fmt.Sprintf("%dx%d-w%d", j.N, j.L, *work)))
	}
	fmt.Printf("ranks %d, %d rows × %d complex per rank, %d FFT(s) per row, %d B per row per peer; medians of %d\n\n",
		P, j.N, j.L, *work, j.bpi, *reps)
	fmt.Println("| scheme | K, D | T ms | T_cm ms | T / T_compute | efficiency max(T_cp,T_cm)/T |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, s := range strings.Split(*schemes, ",") {
		t := med(s)
		if t == 0 {
			continue
		}
		norm, eff := "–", "–"
		if tcp > 0 {
			norm = fmt.Sprintf("%.3f", float64(t)/float64(tcp))
		}
		cm := tcm
		if c := med(s + "/comm"); c > 0 {
			cm = c
		}
		if tcp > 0 && cm > 0 && s != "compute" && s != "comm" {
			eff = fmt.Sprintf("%.3f", float64(max(tcp, cm))/float64(t))
		}
		fmt.Printf("| %s | %s | %.3f | %.3f | %s | %s |\n", s, chosen[s], float64(t)/1e6, float64(cm)/1e6, norm, eff)
	}
	return nil
}

// overlapRecords are the -json lines: per scheme its time, its time
// normalised to compute alone and, for the overlapped schemes, the
// efficiency max(T_cp, T_cm) / T.
func overlapRecords(schemes []string, med func(string) time.Duration, tcp, tcm time.Duration, size string) []benchrec.Record {
	var rs []benchrec.Record
	for _, s := range schemes {
		t := med(s)
		if t == 0 {
			continue
		}
		base := benchrec.Record{Tool: "overlap", Area: "onesided", Case: s, Size: size, Reps: *reps}
		r := base
		r.Metric, r.Value, r.Unit = "t", float64(t)/1e6, "ms"
		rs = append(rs, r)
		if tcp > 0 {
			r = base
			r.Metric, r.Value = "norm", float64(t)/float64(tcp)
			rs = append(rs, r)
		}
		cm := tcm
		if c := med(s + "/comm"); c > 0 {
			cm = c
		}
		if tcp > 0 && cm > 0 && s != "compute" && s != "comm" {
			r = base
			r.Metric, r.Value = "efficiency", float64(max(tcp, cm))/float64(t)
			rs = append(rs, r)
		}
	}
	return rs
}

// alltoall exchanges full[p] with every rank p: all receives, all sends, wait.
func (j *job) alltoall(ctx context.Context, full [][]byte) error {
	var reqs []*endpoint.Request
	for q := 0; q < j.P; q++ {
		r, err := j.c.Irecv(j.result[q], q, 7)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	for k := 1; k <= j.P; k++ {
		q := (j.me + k) % j.P
		r, err := j.c.Isend(full[q], q, 7)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	return endpoint.WaitAll(ctx, reqs...)
}

// msgTransport is the seed's second scheme: tiles travel as non-blocking
// tagged messages (Isend/Irecv), receives pre-posted per slot.
type msgTransport struct {
	c          *endpoint.Comm
	tile       int
	send, recv [][][]byte
	recvReq    [][]*endpoint.Request
	sendReq    [][]*endpoint.Request
}

func (m *msgTransport) Rank() int { return m.c.Rank() }
func (m *msgTransport) Size() int { return m.c.Size() }

func (m *msgTransport) Prepare(ctx context.Context, tileBytes, sendSlots, recvSlots int) error {
	for _, rs := range m.recvReq {
		for _, r := range rs {
			if r != nil {
				_ = r.Cancel()
			}
		}
	}
	P := m.c.Size()
	alloc := func(n int) [][][]byte {
		b := make([][][]byte, n)
		for i := range b {
			b[i] = make([][]byte, P)
			for q := range b[i] {
				b[i][q] = make([]byte, tileBytes)
			}
		}
		return b
	}
	m.tile, m.send, m.recv = tileBytes, alloc(sendSlots), alloc(recvSlots)
	m.recvReq = make([][]*endpoint.Request, recvSlots)
	for i := range m.recvReq {
		m.recvReq[i] = make([]*endpoint.Request, P)
	}
	m.sendReq = make([][]*endpoint.Request, sendSlots)
	return m.c.Barrier(ctx)
}

func (m *msgTransport) SendBuf(slot, peer int) []byte { return m.send[slot][peer] }
func (m *msgTransport) RecvBuf(slot, peer int) []byte { return m.recv[slot][peer] }

func tagOf(seq uint64) int { return int(seq % (1 << 21)) }

func (m *msgTransport) Expect(slot int, seq uint64) error {
	for q := range m.recvReq[slot] {
		r, err := m.c.Irecv(m.recv[slot][q], q, tagOf(seq))
		if err != nil {
			return err
		}
		m.recvReq[slot][q] = r
	}
	return nil
}

func (m *msgTransport) Send(peer, sendSlot, recvSlot, n int, seq uint64) error {
	r, err := m.c.Isend(m.send[sendSlot][peer][:n], peer, tagOf(seq))
	if err != nil {
		return err
	}
	m.sendReq[sendSlot] = append(m.sendReq[sendSlot], r)
	return nil
}

func (m *msgTransport) Wait(ctx context.Context, peer, recvSlot int, seq uint64) error {
	_, err := m.recvReq[recvSlot][peer].Wait(ctx)
	m.recvReq[recvSlot][peer] = nil
	return err
}

func (m *msgTransport) SendDone(ctx context.Context, slot int) error {
	err := endpoint.WaitAll(ctx, m.sendReq[slot]...)
	m.sendReq[slot] = m.sendReq[slot][:0]
	return err
}
