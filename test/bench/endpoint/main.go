// Command endpoint benchmarks weft's endpoint package against itself
// (private vs shared endpoints) and against raw fabric/ (issue 4):
//
//	pingpong  half round-trip latency and bandwidth, endpoint/ vs raw fabric/
//	          (the same domain, measured alternately in one run)
//	rate      message rate of 8 B messages vs sending goroutines,
//	          private endpoints vs one shared endpoint
//	depth     message rate vs expected / unexpected queue depth (0..256
//	          non-matching entries per goroutine), private vs shared
//	inproc    message rate of 8 B messages in ONE process: each of G
//	          goroutines owns a sender and a receiver handle and drives both
//	          (G busy threads in all, so G can match the cores); private
//	          endpoints vs one shared sender and one shared receiver
//	          endpoint; with -depths, also vs queue depth
//
// Run pingpong, rate and depth with two processes, inproc with one, e.g.
//
//	fabrun -n 2 --provider shm bin/endpoint-bench -bench pingpong
//	mpiexec.hydra -n 2 -env WEFT_PROVIDER shm bin/endpoint-bench -bench rate
//	fabrun -n 1 --provider shm bin/endpoint-bench -bench inproc -goroutines 1,2,4
//
// Rank 0 prints a table of medians over -reps repetitions. Flags can also be
// given as WEFT_BENCH_<FLAG> environment variables (e.g. WEFT_BENCH_REPS=7).
//
// With -json rank 0 prints one JSON object per table row instead (the
// schema is benchrec.Record in record.go): for pingpong metric lat (µs) with value
// endpoint/'s median, ref "raw fabric/" and its median, ratio the median of
// the per-repetition ratios; for rate, depth and inproc metric msgrate
// (msg/s) with value the private endpoints' median, ref "shared" and ratio
// private ÷ shared per repetition. Cases: pingpong, rate-g<G>,
// depth-<queue>-d<D>, inproc-g<G>, inproc-g<G>-<queue>-d<D>.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/test/bench/internal/eploop"
)

var (
	benchName   = flag.String("bench", env("BENCH", "pingpong"), "pingpong, rate, depth or all")
	reps        = flag.Int("reps", envInt("REPS", 7), "repetitions; the median is reported")
	iters       = flag.Int("iters", envInt("ITERS", 2000), "ping-pong round trips (small messages) per repetition")
	window      = flag.Int("window", envInt("WINDOW", 64), "messages per window in rate/depth")
	windows     = flag.Int("windows", envInt("WINDOWS", 100), "windows per repetition in rate/depth")
	gList       = flag.String("goroutines", env("GOROUTINES", "1,2,4"), "goroutine counts for rate")
	dList       = flag.String("depths", env("DEPTHS", "0,16,64,256"), "queue depths for depth")
	sizes       = flag.String("sizes", env("SIZES", "8,64,1024,16384,65536,1048576,4194304"), "ping-pong message sizes")
	timeout     = flag.Duration("timeout", 5*time.Minute, "overall limit")
	useAlloc    = flag.Bool("alloc", os.Getenv("WEFT_BENCH_ALLOC") == "1", "endpoint/ ping-pong buffers from Domain.Alloc (mmap, huge pages when available) instead of Go slices")
	rawMsg      = flag.Bool("rawmsg", os.Getenv("WEFT_BENCH_RAWMSG") == "1", "raw fabric ping-pong with untagged fi_injectdata/fi_recv (endpoint/'s wire path) instead of tagged fi_tinject/fi_trecv")
	cpuprof     = flag.String("cpuprofile", env("CPUPROFILE", ""), "write rank 0's CPU profile here (rank r's to this name plus .r<r>)")
	procs       = flag.Int("procs", envInt("PROCS", 0), "GOMAXPROCS per process (0: Go's default)")
	jsonOut     = flag.Bool("json", os.Getenv("WEFT_BENCH_JSON") == "1", "rank 0 prints one JSON object per result line instead of the tables")
	inprocDepth = flag.Bool("inproc-depth", os.Getenv("WEFT_BENCH_INPROC_DEPTH") == "1", "inproc: also measure 2 goroutines vs queue depth (-depths)")
)

func env(k, def string) string {
	if v := os.Getenv("WEFT_BENCH_" + k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv("WEFT_BENCH_" + k)); err == nil {
		return v
	}
	return def
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func main() {
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "endpoint-bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *reps < 1 || *iters < 1 || *window < 1 || *windows < 1 {
		fmt.Fprintf(os.Stderr, "endpoint-bench: -reps, -iters, -window and -windows want ≥ 1\n")
		os.Exit(2)
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "endpoint-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	want := 2
	if *benchName == "inproc" {
		want = 1
	}
	if w.Comm().Size() != want {
		return fmt.Errorf("-bench %s: run with exactly %d process(es) (got %d)", *benchName, want, w.Comm().Size())
	}
	if *cpuprof != "" {
		name := *cpuprof
		if r := w.Comm().Rank(); r > 0 {
			name += ".r" + strconv.Itoa(r)
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if w.Comm().Rank() == 0 && !*jsonOut {
		fmt.Printf("# provider %s, %d reps (median), %d CPUs, GOMAXPROCS %d per process\n", w.Info().Provider, *reps, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	}
	for _, b := range strings.Split(*benchName, ",") {
		switch b {
		case "pingpong":
			err = pingpong(ctx, w)
		case "rate":
			err = rate(ctx, w)
		case "depth":
			err = depth(ctx, w)
		case "inproc":
			err = inproc(ctx, w)
		case "all":
			if err = pingpong(ctx, w); err == nil {
				if err = rate(ctx, w); err == nil {
					err = depth(ctx, w)
				}
			}
		default:
			err = fmt.Errorf("unknown -bench %q", b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- ping-pong --------------------------------------------------------------

// raw is a bare fabric endpoint in the same domain as the endpoint/ handle.
type raw struct {
	cq    *fabric.CQ
	av    *fabric.AV
	ep    *fabric.Endpoint
	peer  fabric.Addr
	comps [16]fabric.Completion
	buf   *fabric.Buffer
	inj   int
	seen  [4]int
}

func openRaw(ctx context.Context, c *endpoint.Comm, size int) (*raw, error) {
	d := c.Domain()
	r := &raw{inj: c.Info().InjectSize}
	var err error
	if r.cq, err = d.OpenCQ(256); err != nil {
		return nil, err
	}
	if r.av, err = d.OpenAV(4); err != nil {
		return nil, err
	}
	if r.ep, err = d.OpenEndpoint(c.Info(), r.cq, r.av); err != nil {
		return nil, err
	}
	name, err := r.ep.Name()
	if err != nil {
		return nil, err
	}
	all, err := c.Allgather(ctx, name)
	if err != nil {
		return nil, err
	}
	addrs, err := r.av.Insert(all...)
	if err != nil {
		return nil, err
	}
	r.peer = addrs[1-c.Rank()]
	if r.buf, err = d.Alloc(2 * size); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *raw) close() {
	r.ep.Close()
	r.av.Close()
	r.cq.Close()
	r.buf.Close()
}

// wait polls until a completion with context want arrives (completions
// for other contexts that arrive meanwhile are remembered).
func (r *raw) wait(want uint64) error {
	for spins := 1; r.seen[want] == 0; spins++ {
		if spins&63 == 0 { // same yield policy as endpoint.Request.Wait
			runtime.Gosched()
		}
		n, err := r.cq.Read(r.comps[:])
		if err != nil && !errors.Is(err, fabric.ErrAgain) {
			return err
		}
		for i := 0; i < n; i++ {
			r.seen[r.comps[i].Context]++
		}
	}
	r.seen[want]--
	return nil
}

func (r *raw) send(b []byte) error {
	for {
		var err error
		if len(b) <= r.inj && *rawMsg {
			err = r.ep.InjectData(b, 1, r.peer)
		} else if len(b) <= r.inj {
			err = r.ep.TInject(b, r.peer, 1)
		} else {
			err = r.ep.TSend(b, r.buf.Desc(), r.peer, 1, 2)
		}
		if err == nil {
			if len(b) > r.inj {
				return r.wait(2)
			}
			return nil
		}
		if !errors.Is(err, fabric.ErrAgain) {
			return err
		}
		r.cq.Read(r.comps[:])
	}
}

// pingpongRaw returns the half round-trip time per message.
func pingpongRaw(r *raw, me, size, n int) (time.Duration, error) {
	all := r.buf.Bytes()
	sb, rb := all[:size], all[size:2*size]
	start := time.Now()
	for i := 0; i < n; i++ {
		var err error
		if *rawMsg {
			err = r.ep.Recv(rb, r.buf.Desc(), fabric.AddrUnspec, 3)
		} else {
			err = r.ep.TRecv(rb, r.buf.Desc(), fabric.AddrUnspec, 1, 0, 3)
		}
		if err != nil {
			return 0, err
		}
		if me == 0 {
			if err := r.send(sb); err != nil {
				return 0, err
			}
			if err := r.wait(3); err != nil {
				return 0, err
			}
		} else {
			if err := r.wait(3); err != nil {
				return 0, err
			}
			if err := r.send(sb); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start) / time.Duration(2*n), nil
}

func pingpongEP(ctx context.Context, c *endpoint.Comm, me, size, n int) (time.Duration, error) {
	sb, rb := make([]byte, size), make([]byte, size)
	if *useAlloc {
		b, err := c.Domain().Alloc(2 * size)
		if err != nil {
			return 0, err
		}
		defer b.Close()
		sb, rb = b.Bytes()[:size], b.Bytes()[size:2*size]
	}
	el, err := eploop.PingPong(ctx, c, 1-me, me == 0, sb, rb, n)
	return el / time.Duration(2*n), err
}

func pingpong(ctx context.Context, w *endpoint.World) error {
	eps, err := w.Comm().CreateEndpoints(ctx, 1)
	if err != nil {
		return err
	}
	c := eps[0]
	defer c.Free()
	me := c.Rank()
	sz := ints(*sizes)
	maxSize := 0
	for _, s := range sz {
		maxSize = max(maxSize, s)
	}
	r, err := openRaw(ctx, c, maxSize)
	if err != nil {
		return fmt.Errorf("raw fabric endpoint: %w", err)
	}
	defer r.close()
	if me == 0 && !*jsonOut {
		fmt.Printf("\n## ping-pong (half round trip), endpoint/ private endpoint vs raw fabric/ tagged, same domain\n")
		fmt.Printf("%10s %12s %12s %8s %12s %12s\n", "bytes", "raw_us", "endpoint_us", "ratio", "raw_MB/s", "endpoint_MB/s")
	}
	for _, size := range sz {
		n := *iters
		if size >= 65536 {
			n = max(20, *iters*4096/size)
		}
		var rawT, epT, q []float64
		for rep := 0; rep < *reps; rep++ {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			// warm up both paths, then measure them alternately
			if _, err := pingpongRaw(r, me, size, max(1, n/10)); err != nil {
				return err
			}
			rt, err := pingpongRaw(r, me, size, n)
			if err != nil {
				return err
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			if _, err := pingpongEP(ctx, c, me, size, max(1, n/10)); err != nil {
				return err
			}
			et, err := pingpongEP(ctx, c, me, size, n)
			if err != nil {
				return err
			}
			rawT = append(rawT, float64(rt.Nanoseconds())/1e3)
			epT = append(epT, float64(et.Nanoseconds())/1e3)
			q = append(q, float64(et)/float64(rt))
		}
		if me == 0 && *jsonOut {
			if err := emit(benchrec.Record{Case: "pingpong", Size: strconv.Itoa(size), Metric: "lat", Unit: "us",
				Value: median(epT), Ref: "raw fabric/", RefValue: median(rawT), Ratio: median(q)}); err != nil {
				return err
			}
		} else if me == 0 {
			rm, em := median(rawT), median(epT)
			fmt.Printf("%10d %12.3f %12.3f %8.3f %12.1f %12.1f\n", size, rm, em, em/rm, float64(size)/rm, float64(size)/em)
		}
	}
	return nil
}

// ---- message rate -----------------------------------------------------------

// stream: goroutine i of rank 0 sends windows of 8-byte messages to its
// partner handle i on rank 1, which receives them and acknowledges each
// window. Extra non-matching entries (depth) sit in the receiver's posted
// queue (expected) or unexpected queue during the run.
func stream(ctx context.Context, w *endpoint.World, g int, shared bool, depth int, unexpected bool) (float64, error) {
	eps, err := w.Comm().CreateEndpoints(ctx, g, endpoint.Shared(shared))
	if err != nil {
		return 0, err
	}
	me := w.Comm().Rank()
	var wg sync.WaitGroup
	errs := make([]error, g)
	times := make([]time.Duration, g)
	for i, c := range eps {
		wg.Add(1)
		go func(i int, c *endpoint.Comm) {
			defer wg.Done()
			times[i], errs[i] = streamOne(ctx, c, me, i, g, depth, unexpected)
		}(i, c)
	}
	wg.Wait()
	for _, c := range eps {
		c.Free()
	}
	var el time.Duration
	for i, e := range errs {
		if e != nil {
			return 0, e
		}
		el = max(el, times[i])
	}
	if err := w.Comm().Barrier(ctx); err != nil {
		return 0, err
	}
	return float64(g**window**windows) / el.Seconds(), nil
}

const junkTag = 999

func streamOne(ctx context.Context, c *endpoint.Comm, me, i, g, depth int, unexpected bool) (time.Duration, error) {
	msg := make([]byte, 8)
	peer := i + g
	if me == 1 {
		peer = i
	}
	st := eploop.NewStream(c, peer, me == 0, *window, 8, 1)
	var junk []*endpoint.Request
	// set up the queue depth
	if me == 1 && !unexpected {
		for k := 0; k < depth; k++ {
			r, err := c.Irecv(make([]byte, 8), peer, junkTag)
			if err != nil {
				return 0, err
			}
			junk = append(junk, r)
		}
	}
	if me == 0 && unexpected {
		for k := 0; k < depth; k++ {
			if err := c.Send(ctx, msg, peer, junkTag); err != nil {
				return 0, err
			}
		}
	}
	var start time.Time
	for win := -1; win < *windows; win++ { // window -1 warms up (connections, caches)
		if win == 0 {
			if err := c.Barrier(ctx); err != nil { // the junk has arrived / is posted
				return 0, err
			}
			start = time.Now()
		}
		if err := st.Window(ctx); err != nil {
			return 0, err
		}
	}
	el := time.Since(start)
	// drain the depth entries
	for _, r := range junk {
		r.Cancel()
		r.Wait(ctx)
	}
	if me == 1 && unexpected {
		for k := 0; k < depth; k++ {
			if _, err := c.Recv(ctx, msg, peer, junkTag); err != nil {
				return 0, err
			}
		}
	}
	return el, nil
}

func rate(ctx context.Context, w *endpoint.World) error {
	me := w.Comm().Rank()
	if me == 0 && !*jsonOut {
		fmt.Printf("\n## message rate, 8 B, window %d x %d, goroutines per process (each owns a handle)\n", *window, *windows)
		fmt.Printf("%10s %14s %14s %8s %12s\n", "goroutines", "private_msg/s", "shared_msg/s", "ratio", "ratio_range")
	}
	for _, g := range ints(*gList) {
		var p, s, q []float64
		for rep := 0; rep < *reps; rep++ {
			rp, err := stream(ctx, w, g, false, 0, false)
			if err != nil {
				return err
			}
			rs, err := stream(ctx, w, g, true, 0, false)
			if err != nil {
				return err
			}
			p, s, q = append(p, rp), append(s, rs), append(q, rp/rs)
		}
		if me == 0 {
			if err := rateRow(fmt.Sprintf("rate-g%d", g), p, s, q, fmt.Sprintf("%10d", g)); err != nil {
				return err
			}
		}
	}
	return nil
}

func depth(ctx context.Context, w *endpoint.World) error {
	me := w.Comm().Rank()
	g := 2
	if me == 0 && !*jsonOut {
		fmt.Printf("\n## message rate vs queue depth, 8 B, %d goroutines per process, depth = non-matching entries per handle\n", g)
		fmt.Printf("%6s %11s %14s %14s %8s %12s\n", "depth", "queue", "private_msg/s", "shared_msg/s", "ratio", "ratio_range")
	}
	for _, unexp := range []bool{false, true} {
		q := "expected"
		if unexp {
			q = "unexpected"
		}
		for _, d := range ints(*dList) {
			var p, s, r []float64
			for rep := 0; rep < *reps; rep++ {
				rp, err := stream(ctx, w, g, false, d, unexp)
				if err != nil {
					return err
				}
				rs, err := stream(ctx, w, g, true, d, unexp)
				if err != nil {
					return err
				}
				p, s, r = append(p, rp), append(s, rs), append(r, rp/rs)
			}
			if me == 0 {
				if err := rateRow(fmt.Sprintf("depth-%s-d%d", q, d), p, s, r, fmt.Sprintf("%6d %11s", d, q)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// rateRow reports one message-rate result: private and shared rates (p, s)
// and the per-repetition ratios q, as a JSON record named c or as a table
// row starting with lead.
func rateRow(c string, p, s, q []float64, lead string) error {
	if *jsonOut {
		return emit(benchrec.Record{Case: c, Size: "8", Metric: "msgrate", Unit: "msg/s",
			Value: median(p), Ref: "shared", RefValue: median(s), Ratio: median(q)})
	}
	sort.Float64s(q)
	fmt.Printf("%s %14.0f %14.0f %8.2f %5.2f-%5.2f\n", lead, median(p), median(s), median(q), q[0], q[len(q)-1])
	return nil
}

// emit writes one -json record of this tool.
func emit(r benchrec.Record) error {
	r.Tool, r.Area, r.Reps = "endpoint", "endpoint", *reps
	return benchrec.Write(os.Stdout, []benchrec.Record{r})
}

// ---- in-process message rate -------------------------------------------------

// inprocStream runs g goroutines in this one process; goroutine i owns sender
// handle i and receiver handle g+i and drives both: per window it posts
// -window receives on its receiver, sends -window 8-byte messages from its
// sender and completes all of them with one WaitAll (which progresses both
// endpoints). Private: 2g endpoints, each with its own domain, CQ and
// matching queues, no locks. Shared: the g sender handles share one locked
// FI_THREAD_SAFE endpoint and the g receiver handles another (the library's
// shared mode with SharedEndpoints(2)), so the goroutines contend for two
// mutexes and every receive is matched in one shared queue, as threads
// sharing an MPI process's rank do. depth non-matching entries per receiver
// sit in the posted (expected) or unexpected queue during the run. The rate
// counts messages of all goroutines over the slowest goroutine's time.
func inprocStream(ctx context.Context, w *endpoint.World, g int, shared bool, depth int, unexpected bool) (float64, error) {
	eps, err := w.Comm().CreateEndpoints(ctx, 2*g, endpoint.Shared(shared), endpoint.SharedEndpoints(2))
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, c := range eps {
			c.Free()
		}
	}()
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, g)
	times := make([]time.Duration, g)
	for i := 0; i < g; i++ {
		wg.Add(1)
		ready.Add(1)
		go func(i int) {
			defer wg.Done()
			times[i], errs[i] = inprocOne(ctx, eps[i], eps[g+i], i, depth, unexpected, &ready, start)
		}(i)
	}
	ready.Wait() // every goroutine has warmed up and set up its queue depth
	close(start)
	wg.Wait()
	var el time.Duration
	for i, e := range errs {
		if e != nil {
			return 0, e
		}
		el = max(el, times[i])
	}
	return float64(g**window**windows) / el.Seconds(), nil
}

func inprocOne(ctx context.Context, s, r *endpoint.Comm, i, depth int, unexpected bool, ready *sync.WaitGroup, start <-chan struct{}) (time.Duration, error) {
	src, dst := s.Rank(), r.Rank()
	tag := 1 + i // distinguishes the goroutines' messages (in shared mode the destination handle does too)
	msg := make([]byte, 8)
	bufs := make([][]byte, *window)
	for k := range bufs {
		bufs[k] = make([]byte, 8)
	}
	reqs := make([]*endpoint.Request, 2**window)
	once := func() error {
		for k := 0; k < *window; k++ {
			rr, err := r.Irecv(bufs[k], src, tag)
			if err != nil {
				return err
			}
			reqs[k] = rr
		}
		for k := 0; k < *window; k++ {
			sr, err := s.Isend(msg, dst, tag)
			if err != nil {
				return err
			}
			reqs[*window+k] = sr
		}
		return endpoint.WaitAll(ctx, reqs...)
	}
	fail := func(err error) (time.Duration, error) {
		ready.Done()
		return 0, err
	}
	if err := once(); err != nil { // warm-up: connections, caches
		return fail(err)
	}
	var junk []*endpoint.Request
	if !unexpected {
		for k := 0; k < depth; k++ {
			jr, err := r.Irecv(make([]byte, 8), src, junkTag)
			if err != nil {
				return fail(err)
			}
			junk = append(junk, jr)
		}
	} else {
		for k := 0; k < depth; k++ {
			// distinct tags so that Iprobe can tell when each has arrived
			sr, err := s.Isend(msg, dst, junkTag+k)
			if err != nil {
				return fail(err)
			}
			for {
				ok, _, err := r.Iprobe(src, junkTag+k)
				if err != nil {
					return fail(err)
				}
				sok, _, serr := sr.Test()
				if serr != nil {
					return fail(serr)
				}
				if ok && sok {
					break
				}
			}
		}
	}
	ready.Done()
	<-start
	t0 := time.Now()
	for win := 0; win < *windows; win++ {
		if err := once(); err != nil {
			return 0, err
		}
	}
	el := time.Since(t0)
	for _, jr := range junk {
		jr.Cancel()
		jr.Wait(ctx)
	}
	if unexpected {
		for k := 0; k < depth; k++ {
			if _, err := r.Recv(ctx, msg, src, junkTag+k); err != nil {
				return 0, err
			}
		}
	}
	return el, nil
}

func inproc(ctx context.Context, w *endpoint.World) error {
	if !*jsonOut {
		fmt.Printf("\n## in-process message rate, 8 B, window %d x %d; G goroutines each drive a sender and a receiver handle (G busy threads)\n", *window, *windows)
		fmt.Printf("%10s %6s %11s %14s %14s %8s %12s\n", "goroutines", "depth", "queue", "private_msg/s", "shared_msg/s", "ratio", "ratio_range")
	}
	row := func(g, d int, unexp bool) error {
		var p, s, q []float64
		for rep := 0; rep < *reps; rep++ {
			// alternate the order so neither mode always runs first
			var rp, rs float64
			var err error
			if rep%2 == 0 {
				if rp, err = inprocStream(ctx, w, g, false, d, unexp); err == nil {
					rs, err = inprocStream(ctx, w, g, true, d, unexp)
				}
			} else {
				if rs, err = inprocStream(ctx, w, g, true, d, unexp); err == nil {
					rp, err = inprocStream(ctx, w, g, false, d, unexp)
				}
			}
			if err != nil {
				return err
			}
			p, s, q = append(p, rp), append(s, rs), append(q, rp/rs)
		}
		queue := "expected"
		if unexp {
			queue = "unexpected"
		}
		name := fmt.Sprintf("inproc-g%d", g)
		if d > 0 {
			name += fmt.Sprintf("-%s-d%d", queue, d)
		}
		return rateRow(name, p, s, q, fmt.Sprintf("%10d %6d %11s", g, d, queue))
	}
	for _, g := range ints(*gList) {
		if err := row(g, 0, false); err != nil {
			return err
		}
	}
	if *inprocDepth {
		for _, unexp := range []bool{false, true} {
			for _, d := range ints(*dList) {
				if d == 0 {
					continue
				}
				if err := row(2, d, unexp); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
