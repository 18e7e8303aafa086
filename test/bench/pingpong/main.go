// Command pingpong runs libfabric's fi_pingpong and weft's own ping-pong
// through package fabric side by side, over the same provider, for a range
// of message sizes, several times, and prints the medians and our/theirs
// ratios.
//
// Both measure the same thing the same way: two processes, RDM endpoints,
// message send/recv, a receive pre-posted for every message, inject for
// messages up to the provider's inject size, busy polling of the CQ. The
// half round-trip time (usec/xfer) is elapsed/(2·iterations) and the
// bandwidth is 2·iterations·size/elapsed (MB = 10^6 bytes), as fi_pingpong
// reports them. The runs of both tools are interleaved so that machine
// load affects them alike.
//
// Usage:
//
//	go run ./test/bench/pingpong -provider shm -sizes 8,64,512,4k,32k,256k,1m -reps 5
//
// Knobs (flag, then environment variable): -provider (WEFT_PROVIDER, default
// shm), -sizes (WEFT_PINGPONG_SIZES), -reps (WEFT_PINGPONG_REPS),
// -iters (WEFT_PINGPONG_ITERS: iterations for 8 B; larger sizes scale it
// down), -path (WEFT_PINGPONG_PATH), -order (WEFT_PINGPONG_ORDER),
// -spins (WEFT_PINGPONG_SPINS), -warmup (WEFT_PINGPONG_WARMUP),
// -fi_pingpong (path of fi_pingpong), -json (WEFT_PINGPONG_JSON).
//
// With -json the tables are replaced by one JSON object per line, two per
// weft path and size (the schema is benchrec.Record in record.go):
//
//	{"tool":"pingpong","area":"fabric","case":"batch","size":"8","metric":"lat","value":1.2,"unit":"us",
//	 "ref":"fi_pingpong","ref_value":1.1,"ratio":1.09,"reps":9,"stat":"median","commit":"…","machine":"…","go":"…"}
//
// metric lat is the half round trip (µs), bw the bandwidth (MB/s); value
// and ref_value are the medians of weft and fi_pingpong, ratio the median
// of the per-repetition ratios (absent without fi_pingpong). The case is
// the path, with -writedata and -recv appended for -op writedata and
// -order recv.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/test/bench/internal/fipingpong"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	role := flag.String("role", "", "internal: client or server of weft's ping-pong")
	provider := flag.String("provider", envOr("WEFT_PROVIDER", "shm"), "libfabric provider")
	sizesFlag := flag.String("sizes", envOr("WEFT_PINGPONG_SIZES", "8,64,512,4k,32k,256k,1m"), "message sizes (k, m suffixes)")
	reps := flag.Int("reps", atoi(envOr("WEFT_PINGPONG_REPS", "5")), "repetitions per size and tool")
	iters := flag.Int("iters", atoi(envOr("WEFT_PINGPONG_ITERS", "100000")), "iterations at ≤ 4 KiB (scaled down above; both programs get the same count)")
	size := flag.Int("size", 0, "internal: message size for -role")
	fiPath := flag.String("fi_pingpong", "fi_pingpong", "path of libfabric's fi_pingpong")
	pathFlag := flag.String("path", envOr("WEFT_PINGPONG_PATH", "batch"), "weft's loop: batch (PostAndRead: one cgo call per step), plain (one call per operation) or both")
	warmup := flag.Int("warmup", atoi(envOr("WEFT_PINGPONG_WARMUP", "1")), "untimed round trips before weft's timed loop (fi_pingpong syncs over TCP instead)")
	spins := flag.Int("spins", atoi(envOr("WEFT_PINGPONG_SPINS", "1024")), "empty CQ reads inside one cgo call before returning to Go")
	op := flag.String("op", envOr("WEFT_PINGPONG_OP", "msg"), "weft's message: msg (inject/send into a posted receive, as fi_pingpong) or writedata (an RMA write into the peer's registered buffer carrying remote CQ data, the shape of a put-with-signal; batch path only)")
	order := flag.String("order", envOr("WEFT_PINGPONG_ORDER", "send"), "batch path's order after a message arrives: send (the reply, then repost the receive, as osu_latency's MPI_Send; MPI_Recv) or recv (repost, then reply, as fi_pingpong)")
	jsonOut := flag.Bool("json", envOr("WEFT_PINGPONG_JSON", "") == "1", "print one JSON object per result line instead of the tables")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "pingpong: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *reps < 1 || *iters < 1 {
		fmt.Fprintf(os.Stderr, "pingpong: -reps %d -iters %d: want ≥ 1 (a number)\n", *reps, *iters)
		os.Exit(2)
	}
	if *order != "send" && *order != "recv" {
		fmt.Fprintf(os.Stderr, "pingpong: -order %q: want send or recv\n", *order)
		os.Exit(2)
	}
	if *op != "msg" && *op != "writedata" {
		fmt.Fprintf(os.Stderr, "pingpong: -op %q: want msg or writedata\n", *op)
		os.Exit(2)
	}
	if *op == "writedata" && *pathFlag != "batch" {
		fmt.Fprintf(os.Stderr, "pingpong: -op writedata runs on -path batch only\n")
		os.Exit(2)
	}
	rc := roleConfig{path: *pathFlag, warmup: *warmup, spins: *spins, sendFirst: *order == "send", writeData: *op == "writedata"}
	if *role != "" {
		if err := runRole(*role, *provider, *size, *iters, rc); err != nil {
			fmt.Fprintln(os.Stderr, "pingpong:", *role+":", err)
			os.Exit(1)
		}
		return
	}
	sizes, err := parseSizes(*sizesFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(2)
	}
	var paths []string
	switch *pathFlag {
	case "batch", "plain":
		paths = []string{*pathFlag}
	case "both":
		paths = []string{"plain", "batch"}
	default:
		fmt.Fprintf(os.Stderr, "pingpong: -path %q: want batch, plain or both\n", *pathFlag)
		os.Exit(2)
	}
	if err := orchestrate(*provider, sizes, *reps, *iters, *fiPath, paths, rc, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1<<10, f[:len(f)-1]
		case strings.HasSuffix(f, "m"):
			mult, f = 1<<20, f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// itersFor scales the iteration count down for large messages so that
// every size moves a similar amount of time.
func itersFor(base, size int) int {
	n := base
	if size > 4096 {
		n = base * 4096 / size
	}
	if n < 100 {
		n = 100
	}
	return n
}

type result struct{ usec, mbps float64 }

func orchestrate(prov string, sizes []int, reps, iters int, fiPath string, paths []string, rc roleConfig, jsonOut bool) error {
	haveFI := true
	if _, err := exec.LookPath(fiPath); err != nil {
		fmt.Fprintf(os.Stderr, "pingpong: %s not found (%v): measuring weft only\n", fiPath, err)
		haveFI = false
	}
	theirs := map[int][]result{}
	ours := map[string]map[int][]result{}
	for _, p := range paths {
		ours[p] = map[int][]result{}
	}
	for r := 0; r < reps; r++ {
		for _, sz := range sizes {
			n := itersFor(iters, sz)
			if haveFI {
				res, err := runFI(fiPath, prov, sz, n)
				if err != nil {
					return fmt.Errorf("fi_pingpong size %d: %w", sz, err)
				}
				theirs[sz] = append(theirs[sz], res)
			}
			line := fmt.Sprintf("rep %d size %d: fi %.2f us %.1f MB/s", r+1, sz, last(theirs[sz]).usec, last(theirs[sz]).mbps)
			for _, path := range paths {
				rc.path = path
				res, err := runOurs(prov, sz, n, rc)
				if err != nil {
					return fmt.Errorf("weft (%s) size %d: %w", path, sz, err)
				}
				ours[path][sz] = append(ours[path][sz], res)
				line += fmt.Sprintf(", weft %s %.2f us %.1f MB/s", path, res.usec, res.mbps)
			}
			fmt.Fprintln(os.Stderr, line)
		}
	}
	if jsonOut {
		return benchrec.Write(os.Stdout, records(sizes, reps, paths, rc, theirs, ours))
	}
	fmt.Printf("provider %s, %d repetitions, weft op %s, batch order %s, medians (half round trip; MB/s = 10^6 B/s)\n", prov, reps, rc.op(), rc.order())
	for _, path := range paths {
		fmt.Printf("weft path %s:\n", path)
		fmt.Printf("%8s %12s %12s %9s %12s %12s %9s\n", "bytes", "fi usec", "weft usec", "lat ratio", "fi MB/s", "weft MB/s", "bw ratio")
		for _, sz := range sizes {
			fu, fb := median(theirs[sz], false), median(theirs[sz], true)
			wu, wb := median(ours[path][sz], false), median(ours[path][sz], true)
			fmt.Printf("%8d %12.2f %12.2f %9.3f %12.1f %12.1f %9.3f\n", sz, fu, wu, wu/fu, fb, wb, wb/fb)
		}
	}
	// On a small VM the latency is bimodal (the host places the two
	// busy-polling processes near or far from each other, and that changes
	// between repetitions), so medians taken of each program apart can
	// compare one regime with the other. The ratio of each repetition
	// (fi_pingpong and weft run back to back in it) compares like with like.
	if haveFI {
		fmt.Printf("paired per repetition (median over repetitions of weft ÷ fi_pingpong in the same repetition):\n")
		fmt.Printf("%8s", "bytes")
		for _, path := range paths {
			fmt.Printf(" %12s %12s", path+" lat", path+" bw")
		}
		fmt.Println()
		for _, sz := range sizes {
			fmt.Printf("%8d", sz)
			for _, path := range paths {
				fmt.Printf(" %12.3f %12.3f", pairedMedian(ours[path][sz], theirs[sz], false), pairedMedian(ours[path][sz], theirs[sz], true))
			}
			fmt.Println()
		}
	}
	// The best repetition of each program is another like-with-like view.
	fmt.Printf("best repetition (lowest usec, highest MB/s) of each program:\n")
	fmt.Printf("%8s %12s", "bytes", "fi usec")
	for _, path := range paths {
		fmt.Printf(" %12s %9s", path+" usec", "ratio")
	}
	fmt.Printf(" %12s", "fi MB/s")
	for _, path := range paths {
		fmt.Printf(" %12s %9s", path+" MB/s", "ratio")
	}
	fmt.Println()
	for _, sz := range sizes {
		fu, fb := best(theirs[sz], false), best(theirs[sz], true)
		fmt.Printf("%8d %12.2f", sz, fu)
		for _, path := range paths {
			wu := best(ours[path][sz], false)
			fmt.Printf(" %12.2f %9.3f", wu, wu/fu)
		}
		fmt.Printf(" %12.1f", fb)
		for _, path := range paths {
			wb := best(ours[path][sz], true)
			fmt.Printf(" %12.1f %9.3f", wb, wb/fb)
		}
		fmt.Println()
	}
	return nil
}

// records are the -json lines: latency and bandwidth per path and size.
func records(sizes []int, reps int, paths []string, rc roleConfig, theirs map[int][]result, ours map[string]map[int][]result) []benchrec.Record {
	var rs []benchrec.Record
	for _, path := range paths {
		c := path
		if rc.writeData {
			c += "-writedata"
		}
		if !rc.sendFirst {
			c += "-recv"
		}
		for _, sz := range sizes {
			for _, bw := range []bool{false, true} {
				r := benchrec.Record{Tool: "pingpong", Area: "fabric", Case: c, Size: strconv.Itoa(sz), Metric: "lat", Unit: "us",
					Value: median(ours[path][sz], bw), Reps: reps}
				if bw {
					r.Metric, r.Unit = "bw", "MB/s"
				}
				if len(theirs[sz]) > 0 {
					r.Ref, r.RefValue, r.Ratio = "fi_pingpong", median(theirs[sz], bw), pairedMedian(ours[path][sz], theirs[sz], bw)
				}
				rs = append(rs, r)
			}
		}
	}
	return rs
}

// best returns the lowest latency (bw false) or the highest bandwidth.
func best(rs []result, bw bool) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := rs[0]
	for _, r := range rs[1:] {
		if bw && r.mbps > v.mbps {
			v = r
		}
		if !bw && r.usec < v.usec {
			v = r
		}
	}
	if bw {
		return v.mbps
	}
	return v.usec
}

func last(r []result) result {
	if len(r) == 0 {
		return result{}
	}
	return r[len(r)-1]
}

// pairedMedian is the median over repetitions i of ours[i] ÷ theirs[i]
// (latency, or bandwidth when bw).
func pairedMedian(ours, theirs []result, bw bool) float64 {
	n := min(len(ours), len(theirs))
	if n == 0 {
		return math.NaN() // no repetition with both programs' figures
	}
	r := make([]result, n)
	for i := range n {
		if bw {
			r[i].mbps = ours[i].mbps / theirs[i].mbps
		} else {
			r[i].usec = ours[i].usec / theirs[i].usec
		}
	}
	return median(r, bw)
}

func median(rs []result, bw bool) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		if bw {
			v[i] = r.mbps
		} else {
			v[i] = r.usec
		}
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// runFI runs fi_pingpong's server and client (package fipingpong).
func runFI(path, prov string, size, iters int) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := fipingpong.Run(ctx, path, prov, size, iters)
	return result{usec: r.Usec, mbps: r.MBps}, err
}

// runOurs starts this program twice (-role server, -role client), relays
// the endpoint names between them and reads the client's result line.
func runOurs(prov string, size, iters int, rc roleConfig) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
		err bytes.Buffer
	}
	var kids [2]*child
	for i, role := range []string{"server", "client"} {
		c := &child{cmd: exec.CommandContext(ctx, self, "-role", role, "-provider", prov,
			"-size", strconv.Itoa(size), "-iters", strconv.Itoa(iters), "-path", rc.path,
			"-warmup", strconv.Itoa(rc.warmup), "-spins", strconv.Itoa(rc.spins), "-order", rc.order(), "-op", rc.op())}
		c.cmd.Stderr = &c.err
		c.in, _ = c.cmd.StdinPipe()
		o, _ := c.cmd.StdoutPipe()
		c.out = bufio.NewReader(o)
		if err := c.cmd.Start(); err != nil {
			return result{}, err
		}
		defer c.cmd.Wait()
		kids[i] = c
	}
	var names [2]string
	for i, c := range kids {
		line, err := c.out.ReadString('\n')
		if err != nil {
			return result{}, fmt.Errorf("reading name: %v: %s", err, c.err.String())
		}
		names[i] = line
	}
	io.WriteString(kids[0].in, names[1])
	io.WriteString(kids[1].in, names[0])
	line, err := kids[1].out.ReadString('\n')
	if err != nil {
		kids[1].cmd.Wait() // stderr is complete only after Wait
		kids[0].cmd.Process.Kill()
		kids[0].cmd.Wait()
		return result{}, fmt.Errorf("client: %v: %s / server: %s", err, kids[1].err.String(), kids[0].err.String())
	}
	var r result
	if _, err := fmt.Sscanf(line, "RESULT %f %f", &r.usec, &r.mbps); err != nil {
		return result{}, fmt.Errorf("client said %q", line)
	}
	return r, nil
}

// roleConfig selects how weft's side runs its loop.
type roleConfig struct {
	path   string // "plain" or "batch"
	warmup int    // untimed round trips first
	spins  int    // empty CQ reads per cgo call
	// sendFirst: the batch path posts the reply before reposting the
	// receive (osu_latency's order), which takes the repost off the
	// critical path; false keeps fi_pingpong's order.
	sendFirst bool
	// writeData: each message is an RMA write into the peer's registered
	// receive buffer carrying remote CQ data, whose completion at the
	// peer marks the arrival; no receives are posted.
	writeData bool
}

// op is the -op value that gives rc.writeData.
func (rc roleConfig) op() string {
	if rc.writeData {
		return "writedata"
	}
	return "msg"
}

// order is the -order value that gives rc.sendFirst.
func (rc roleConfig) order() string {
	if rc.sendFirst {
		return "send"
	}
	return "recv"
}

// runRole is one side of weft's ping-pong. Both paths make the calls
// fi_pingpong makes and, unless rc.sendFirst reorders the batch path's
// step, in its order (util/pingpong.c, pingpong()):
//
//	client: send; wait for the receive; repost the receive
//	server: wait for the receive; repost the receive; send
//
// where "send" is an inject when the size is below the provider's inject
// size and otherwise a send followed by waiting for its completion.
// "plain" makes one cgo call per operation (and one per CQ poll burst).
// "batch" hands each step to C in one Endpoint.PostAndRead call: the
// repost, the send and the spin on the CQ until the next message is in;
// with rc.sendFirst the send goes first and the repost after it, so the
// reply leaves without waiting for the repost (the peer cannot answer
// before it has the reply, so the receive is still posted in time).
func runRole(role, prov string, size, iters int, rc roleConfig) error {
	caps := fabric.CapMsg
	if rc.writeData {
		caps |= fabric.CapRMA | fabric.CapRemoteCQData
	}
	info, err := fabric.Select(&fabric.Hints{Provider: prov, Caps: caps}, true)
	if err != nil {
		return err
	}
	fab, err := fabric.OpenFabric(info)
	if err != nil {
		return err
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(info)
	if err != nil {
		return err
	}
	cq, err := dom.OpenCQ(128)
	if err != nil {
		return err
	}
	av, err := dom.OpenAV(1)
	if err != nil {
		return err
	}
	ep, err := dom.OpenEndpoint(info, cq, av)
	if err != nil {
		return err
	}
	sbuf, err := dom.Alloc(size)
	if err != nil {
		return err
	}
	rbuf, err := dom.Alloc(max(size, 64)) // fi_pingpong: MAX(size, PP_MAX_CTRL_MSG)
	if err != nil {
		return err
	}
	name, err := ep.Name()
	if err != nil {
		return err
	}
	// "name raddr key": the receive buffer's remote address and key serve
	// -op writedata.
	fmt.Printf("%s %d %d\n", hex.EncodeToString(name), rbuf.MR().RemoteAddr(rbuf.Bytes()), rbuf.MR().Key())
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return err
	}
	var peerHex string
	var peerRAddr, peerKey uint64
	if _, err := fmt.Sscan(line, &peerHex, &peerRAddr, &peerKey); err != nil {
		return fmt.Errorf("peer's line %q: %w", line, err)
	}
	peerName, err := hex.DecodeString(peerHex)
	if err != nil {
		return err
	}
	addrs, err := av.Insert(peerName)
	if err != nil {
		return err
	}
	peer := addrs[0]
	for i := range sbuf.Bytes() {
		sbuf.Bytes()[i] = byte(i)
	}
	sb, sd, rb, rd := sbuf.Bytes(), sbuf.Desc(), rbuf.Bytes(), rbuf.Desc()
	inject := size < info.InjectSize // fi_pingpong: transfer_size < inject_size
	spins := max(rc.spins, 1)
	const rxCtx, txCtx = 1, 2
	var comps [16]fabric.Completion
	gotRx, pendingTx := false, 0
	account := func(cs []fabric.Completion) {
		for _, c := range cs {
			if c.Context == rxCtx || c.Flags&fabric.CompRemoteCQData != 0 {
				gotRx = true
			} else {
				pendingTx--
			}
		}
	}

	var step func(post, wait bool) error // repost+send (post), then wait for the next message (wait)
	var sendOp fabric.Op
	switch {
	case rc.writeData && inject:
		sendOp = fabric.InjectWriteDataOp(sb, 1, peer, peerRAddr, peerKey)
	case rc.writeData:
		sendOp = fabric.WriteDataOp(sb, sd, 1, peer, peerRAddr, peerKey, txCtx)
	case inject:
		sendOp = fabric.InjectOp(sb, peer)
	default:
		sendOp = fabric.SendOp(sb, sd, peer, txCtx)
	}
	recvOp := fabric.RecvOp(rb, rd, peer, rxCtx)
	// repost is what a step posts besides the send: the receive, or
	// nothing when the message is an RMA write.
	repost := []fabric.Op{recvOp}
	if rc.writeData {
		repost = nil
	}
	switch rc.path {
	case "batch":
		both, sendOnly := append(slices.Clone(repost), sendOp), []fabric.Op{sendOp} // PostAndRead only reads them
		if rc.sendFirst {
			both = append([]fabric.Op{sendOp}, repost...)
		}
		step = func(repost, wait bool) error {
			ops := both
			if !repost {
				ops = sendOnly
			}
			if !inject {
				pendingTx++
			}
			gotRx = false
			for {
				posted, n, err := ep.PostAndRead(ops, cq, comps[:], spins)
				if err != nil && !errors.Is(err, fabric.ErrAgain) {
					return err
				}
				ops = ops[posted:]
				account(comps[:n])
				if len(ops) == 0 && pendingTx == 0 && (gotRx || !wait) {
					return nil
				}
			}
		}
	case "plain":
		post := func(op func() error) error {
			for {
				err := op()
				if err == nil || !errors.Is(err, fabric.ErrAgain) {
					return err
				}
				n, err := cq.Read(comps[:])
				if err != nil {
					return err
				}
				account(comps[:n])
			}
		}
		waitFor := func(rx bool) error {
			for (rx && !gotRx) || pendingTx > 0 {
				n, err := cq.ReadSpin(comps[:], spins)
				if err != nil {
					return err
				}
				account(comps[:n])
			}
			return nil
		}
		step = func(repost, wait bool) error {
			gotRx = false
			if repost {
				if err := post(func() error { return ep.Recv(rb, rd, peer, rxCtx) }); err != nil {
					return err
				}
			}
			if inject {
				if err := post(func() error { return ep.Inject(sb, peer) }); err != nil {
					return err
				}
			} else {
				pendingTx++
				if err := post(func() error { return ep.Send(sb, sd, peer, txCtx) }); err != nil {
					return err
				}
				if err := waitFor(false); err != nil { // fi_pingpong waits for the send's completion
					return err
				}
			}
			if wait {
				return waitFor(true)
			}
			return nil
		}
	default:
		return fmt.Errorf("unknown -path %q", rc.path)
	}
	waitOnly := func() error { // the server's first receive
		gotRx = false
		for !gotRx {
			_, n, err := ep.PostAndRead(nil, cq, comps[:], spins)
			if err != nil {
				return err
			}
			account(comps[:n])
		}
		return nil
	}

	if err := postAll(ep, repost); err != nil {
		return err
	}
	total := rc.warmup + iters
	var start time.Time
	if role == "client" {
		for i := 0; i < total; i++ {
			if i == rc.warmup {
				start = time.Now()
			}
			if err := step(i > 0, true); err != nil {
				return err
			}
		}
		// fi_pingpong reposts after the last receive inside its timed loop.
		if err := postAll(ep, repost); err != nil {
			return err
		}
	} else {
		if err := waitOnly(); err != nil {
			return err
		}
		for i := 0; i < total; i++ {
			if i == rc.warmup {
				start = time.Now()
			}
			if err := step(true, i < total-1); err != nil {
				return err
			}
		}
	}
	elapsed := time.Since(start)
	if !bytes.Equal(rb[:min(size, 64)], sb[:min(size, 64)]) {
		return fmt.Errorf("payload corrupted")
	}
	if role == "client" {
		usec := elapsed.Seconds() * 1e6 / float64(2*iters)
		mbps := float64(2*iters*size) / elapsed.Seconds() / 1e6
		fmt.Printf("RESULT %f %f\n", usec, mbps)
	}
	// Let the peer finish its last receive before closing.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		cq.Read(comps[:])
	}
	return nil
}

// postAll posts ops (none: nothing) in one batch.
func postAll(ep *fabric.Endpoint, ops []fabric.Op) error {
	if len(ops) == 0 {
		return nil
	}
	_, err := ep.PostBatch(ops)
	return err
}
