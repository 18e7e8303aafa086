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
// down), -fi_pingpong (path of fi_pingpong).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/fabric"
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
	iters := flag.Int("iters", atoi(envOr("WEFT_PINGPONG_ITERS", "10000")), "iterations at the smallest size")
	size := flag.Int("size", 0, "internal: message size for -role")
	fiPath := flag.String("fi_pingpong", "fi_pingpong", "path of libfabric's fi_pingpong")
	flag.Parse()
	if *role != "" {
		if err := runRole(*role, *provider, *size, *iters); err != nil {
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
	if err := orchestrate(*provider, sizes, *reps, *iters, *fiPath); err != nil {
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

func orchestrate(prov string, sizes []int, reps, iters int, fiPath string) error {
	haveFI := true
	if _, err := exec.LookPath(fiPath); err != nil {
		fmt.Fprintf(os.Stderr, "pingpong: %s not found (%v): measuring weft only\n", fiPath, err)
		haveFI = false
	}
	theirs := map[int][]result{}
	ours := map[int][]result{}
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
			res, err := runOurs(prov, sz, n)
			if err != nil {
				return fmt.Errorf("weft size %d: %w", sz, err)
			}
			ours[sz] = append(ours[sz], res)
			fmt.Fprintf(os.Stderr, "rep %d size %d: fi %.2f us %.1f MB/s, weft %.2f us %.1f MB/s\n", r+1, sz,
				last(theirs[sz]).usec, last(theirs[sz]).mbps, res.usec, res.mbps)
		}
	}
	fmt.Printf("provider %s, %d repetitions, medians (half round trip; MB/s = 10^6 B/s)\n", prov, reps)
	fmt.Printf("%8s %12s %12s %9s %12s %12s %9s\n", "bytes", "fi usec", "weft usec", "lat ratio", "fi MB/s", "weft MB/s", "bw ratio")
	for _, sz := range sizes {
		fu, fb := median(theirs[sz], false), median(theirs[sz], true)
		wu, wb := median(ours[sz], false), median(ours[sz], true)
		fmt.Printf("%8d %12.2f %12.2f %9.3f %12.1f %12.1f %9.3f\n", sz, fu, wu, wu/fu, fb, wb, wb/fb)
	}
	return nil
}

func last(r []result) result {
	if len(r) == 0 {
		return result{}
	}
	return r[len(r)-1]
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

var fiLine = regexp.MustCompile(`(?m)^\S+\s+\S+\s+=?\S+\s+\S+\s+(\S+)s\s+(\S+)\s+(\S+)\s+\S+\s*$`)

// runFI runs fi_pingpong's server and client on a random control port and
// parses the client's line.
func runFI(path, prov string, size, iters int) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	port := strconv.Itoa(20000 + rand.Intn(20000))
	args := []string{"-p", prov, "-e", "rdm", "-S", strconv.Itoa(size), "-I", strconv.Itoa(iters)}
	srv := exec.CommandContext(ctx, path, append(args, "-B", port)...)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return result{}, err
	}
	defer srv.Wait()
	var out []byte
	var err error
	for try := 0; try < 50; try++ { // the server needs a moment to listen
		time.Sleep(100 * time.Millisecond)
		cli := exec.CommandContext(ctx, path, append(args, "-P", port, "127.0.0.1")...)
		out, err = cli.CombinedOutput()
		if err == nil {
			break
		}
	}
	if err != nil {
		srv.Process.Kill()
		return result{}, fmt.Errorf("%v: %s / server: %s", err, out, srvOut.String())
	}
	m := fiLine.FindStringSubmatch(string(out))
	if m == nil {
		return result{}, fmt.Errorf("cannot parse fi_pingpong output %q", out)
	}
	mbps, _ := strconv.ParseFloat(m[2], 64)
	usec, _ := strconv.ParseFloat(m[3], 64)
	return result{usec: usec, mbps: mbps}, nil
}

// runOurs starts this program twice (-role server, -role client), relays
// the endpoint names between them and reads the client's result line.
func runOurs(prov string, size, iters int) (result, error) {
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
			"-size", strconv.Itoa(size), "-iters", strconv.Itoa(iters))}
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
		return result{}, fmt.Errorf("client: %v: %s / server: %s", err, kids[1].err.String(), kids[0].err.String())
	}
	var r result
	if _, err := fmt.Sscanf(line, "RESULT %f %f", &r.usec, &r.mbps); err != nil {
		return result{}, fmt.Errorf("client said %q", line)
	}
	return r, nil
}

// runRole is one side of weft's ping-pong.
func runRole(role, prov string, size, iters int) error {
	info, err := fabric.Select(&fabric.Hints{Provider: prov, Caps: fabric.CapMsg}, true)
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
	name, err := ep.Name()
	if err != nil {
		return err
	}
	fmt.Printf("%s\n", hex.EncodeToString(name))
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return err
	}
	peerName, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil {
		return err
	}
	addrs, err := av.Insert(peerName)
	if err != nil {
		return err
	}
	peer := addrs[0]
	sbuf, err := dom.Alloc(size)
	if err != nil {
		return err
	}
	rbuf, err := dom.Alloc(size)
	if err != nil {
		return err
	}
	for i := range sbuf.Bytes() {
		sbuf.Bytes()[i] = byte(i)
	}
	sb, sd, rb, rd := sbuf.Bytes(), sbuf.Desc(), rbuf.Bytes(), rbuf.Desc()
	inject := size <= info.InjectSize
	const rxCtx, txCtx = 1, 2
	var comps [16]fabric.Completion
	pendingTx := 0
	// waitRecv polls until the receive completes, counting send
	// completions on the way.
	waitRecv := func() error {
		for {
			n, err := cq.ReadSpin(comps[:], 64)
			if err != nil {
				return err
			}
			got := false
			for _, c := range comps[:n] {
				if c.Context == rxCtx {
					got = true
				} else {
					pendingTx--
				}
			}
			if got {
				return nil
			}
		}
	}
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
			for _, c := range comps[:n] {
				if c.Context == txCtx {
					pendingTx--
				}
			}
		}
	}
	send := func() error {
		if inject {
			return post(func() error { return ep.Inject(sb, peer) })
		}
		pendingTx++
		return post(func() error { return ep.Send(sb, sd, peer, txCtx) })
	}
	recv := func() error { return post(func() error { return ep.Recv(rb, rd, peer, rxCtx) }) }

	warm := iters / 10
	if err := recv(); err != nil {
		return err
	}
	var start time.Time
	for i := 0; i < warm+iters; i++ {
		if i == warm {
			start = time.Now()
		}
		if role == "client" {
			if err := send(); err != nil {
				return err
			}
			if err := waitRecv(); err != nil {
				return err
			}
			if err := recv(); err != nil {
				return err
			}
		} else {
			if err := waitRecv(); err != nil {
				return err
			}
			if err := recv(); err != nil {
				return err
			}
			if err := send(); err != nil {
				return err
			}
		}
	}
	elapsed := time.Since(start)
	for pendingTx > 0 { // drain our send completions
		n, err := cq.Read(comps[:])
		if err != nil {
			return err
		}
		pendingTx -= n
	}
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
