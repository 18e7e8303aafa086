// Command hybrid checks a weft job whose ranks span nodes: one world
// communicator whose same-node peers use the node transport (and
// onesided's direct stores) and whose other-node peers use a network
// provider. Every rank checks, with the results computed independently:
//
//   - transports: the node transport exactly for the peers on its host,
//     libfabric for the rest, on the provider WEFT_HYBRID_WANT_PROVIDER
//     names (when set), and NodeLocal agreeing with the host names;
//   - point to point: a ring of typed slices, then rank 0 receiving one
//     message from every other rank with AnySource (same-node and
//     other-node senders mixed);
//   - typed messages: a column of a row-major grid (ddt.Vector) sent to
//     the right neighbour and received as a contiguous row; then 64 KiB
//     of small blocks and two blocks of 80 KiB (each path of a large
//     typed message to a libfabric peer: packed or pipelined, zero copy);
//   - collectives: Allreduce (sum), Bcast from the last rank, Alltoall,
//     Allgather, Reduce (max) to the last rank, Barrier, hierarchical
//     (the node level) where a node holds several ranks;
//   - onesided: a window on the world communicator, a Put to every rank
//     and a Fence; direct stores exactly for the same-node ranks.
//
// Each rank prints "rank R of N on HOST: hybrid ok (node [..] net [..]
// provider P)" and exits 0, or prints what failed and exits 1 (after
// asking the launcher to abort the job). WEFT_HYBRID_HOLD=D makes each
// rank wait D after its checks, before finalising (for the node-failure
// test, which kills a node meanwhile), then wait in a receive from its
// right neighbour, which sends only after its own wait.
// WEFT_HYBRID_TRACE=1 writes how long Init and each phase took to stderr. It runs under fabrun, srun
// --mpi=pmi2 and mpiexec.hydra.
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/onesided"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	w, err := endpoint.Init(ctx)
	if os.Getenv("WEFT_HYBRID_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "init took %v\n", time.Since(start))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hybrid: %v\n", err)
		os.Exit(1)
	}
	c := w.Comm()
	msg, err := run(ctx, w, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hybrid: rank %d: %v\n", c.Rank(), err)
		w.Job().Abort(1, err.Error())
		os.Exit(1)
	}
	if d, err := time.ParseDuration(os.Getenv("WEFT_HYBRID_HOLD")); err == nil {
		// Every rank waits in a receive from the next rank, which sends
		// after d: a node that dies meanwhile leaves its peers waiting on
		// it, and the launcher must end the job.
		fmt.Printf("rank %d holding\n", c.Rank())
		right, left := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		r, err := endpoint.IrecvSlice(c, make([]byte, 1), right, 9)
		if err == nil {
			time.Sleep(d)
			err = endpoint.SendSlice(ctx, c, []byte{1}, left, 9)
		}
		if err == nil {
			_, err = r.Wait(ctx)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hybrid: rank %d: hold: %v\n", c.Rank(), err)
			os.Exit(1)
		}
	}
	if err := w.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "hybrid: rank %d: close: %v\n", c.Rank(), err)
		os.Exit(1)
	}
	fmt.Println(msg)
}

func run(ctx context.Context, w *endpoint.World, c *endpoint.Comm) (string, error) {
	rank, size := c.Rank(), c.Size()
	t0 := time.Now()
	phase := func(name string) {
		if os.Getenv("WEFT_HYBRID_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "rank %d: %s at %v\n", rank, name, time.Since(t0))
		}
	}
	host, _ := os.Hostname()
	all, err := c.Allgather(ctx, []byte(host))
	if err != nil {
		return "", fmt.Errorf("allgather host names: %w", err)
	}
	var node, net []int
	for r := range size {
		if r == rank {
			continue
		}
		tr, err := c.Transport(r)
		if err != nil {
			return "", err
		}
		same := string(all[r]) == host
		if same {
			node = append(node, r)
		} else {
			net = append(net, r)
		}
		if want := map[bool]string{true: endpoint.TransportNode, false: endpoint.TransportFabric}[same]; tr != want {
			return "", fmt.Errorf("rank %d (on %s) uses transport %s, want %s", r, all[r], tr, want)
		}
	}
	if _, lsize := c.NodeLocal(); lsize != len(node)+1 {
		return "", fmt.Errorf("NodeLocal size %d, but %d ranks share host %s", lsize, len(node)+1, host)
	}
	prov := "none"
	if len(net) > 0 {
		info := w.Info()
		if info == nil {
			return "", fmt.Errorf("peers on other nodes but no libfabric provider")
		}
		prov = info.Provider
		if want := os.Getenv("WEFT_HYBRID_WANT_PROVIDER"); want != "" && prov != want {
			return "", fmt.Errorf("provider %s, want %s", prov, want)
		}
	}
	right, left := (rank+1)%size, (rank+size-1)%size

	phase("transports")
	// Point to point: a ring, then AnySource at rank 0.
	out := []int64{int64(rank), int64(rank * rank)}
	in := make([]int64, 2)
	r, err := endpoint.IrecvSlice(c, in, left, 1)
	if err != nil {
		return "", err
	}
	if err := endpoint.SendSlice(ctx, c, out, right, 1); err != nil {
		return "", fmt.Errorf("ring send to %d: %w", right, err)
	}
	if _, err := r.Wait(ctx); err != nil {
		return "", fmt.Errorf("ring receive from %d: %w", left, err)
	}
	if in[0] != int64(left) || in[1] != int64(left*left) {
		return "", fmt.Errorf("ring: got %v from %d", in, left)
	}
	if rank == 0 {
		var from []int
		for range size - 1 {
			v := make([]int64, 1)
			st, err := endpoint.RecvSlice(ctx, c, v, endpoint.AnySource, 2)
			if err != nil {
				return "", fmt.Errorf("AnySource receive: %w", err)
			}
			if v[0] != int64(st.Source)*7 {
				return "", fmt.Errorf("AnySource: %d from rank %d, want %d", v[0], st.Source, st.Source*7)
			}
			from = append(from, st.Source)
		}
		slices.Sort(from)
		for i, s := range from {
			if s != i+1 {
				return "", fmt.Errorf("AnySource: messages from %v", from)
			}
		}
	} else if err := endpoint.SendSlice(ctx, c, []int64{int64(rank) * 7}, 0, 2); err != nil {
		return "", fmt.Errorf("send to rank 0: %w", err)
	}

	phase("point to point")
	// Typed: column 1 of a 4×3 row-major grid to the right, received as 4
	// contiguous float64.
	col, err := ddt.Vector(4, 1, 3, ddt.Float64)
	if err != nil {
		return "", err
	}
	if err := col.Commit(); err != nil {
		return "", err
	}
	grid := make([]float64, 12)
	for i := range grid {
		grid[i] = float64(rank*100 + i)
	}
	row := make([]float64, 4)
	rr, err := c.IrecvTyped(endpoint.AsBytes(row), 4, ddt.Float64, left, 3)
	if err != nil {
		return "", err
	}
	if err := c.SendTyped(ctx, endpoint.AsBytes(grid[1:]), 1, col, right, 3); err != nil {
		return "", fmt.Errorf("typed send: %w", err)
	}
	if _, err := rr.Wait(ctx); err != nil {
		return "", fmt.Errorf("typed receive: %w", err)
	}
	for i, v := range row {
		if want := float64(left*100 + 1 + 3*i); v != want {
			return "", fmt.Errorf("typed: row %v from rank %d, element %d want %v", row, left, i, want)
		}
	}

	// Large typed messages, over libfabric to a neighbour on another
	// node: 64 KiB of every other float64 (many small blocks: packed, or
	// pipelined where the provider takes the pipeline) received as a
	// contiguous row, and two blocks of 80 KiB (zero copy: the receiver
	// reads the sender's blocks) received into a layout of other gaps.
	const nsmall, nbig = 8192, 10240
	every, err := ddt.Vector(nsmall, 1, 2, ddt.Float64)
	if err != nil {
		return "", err
	}
	twoBig, err := ddt.Vector(2, nbig, nbig+7, ddt.Float64)
	if err != nil {
		return "", err
	}
	twoBigRecv, err := ddt.Vector(2, nbig, nbig+3, ddt.Float64)
	if err != nil {
		return "", err
	}
	for _, t := range []*ddt.Type{every, twoBig, twoBigRecv} {
		if err := t.Commit(); err != nil {
			return "", err
		}
	}
	src := make([]float64, 2*(nbig+7))
	for i := range src {
		src[i] = float64(rank*1_000_000 + i)
	}
	flat := make([]float64, nsmall)
	gaps := make([]float64, 2*(nbig+3))
	rs, err := c.IrecvTyped(endpoint.AsBytes(flat), nsmall, ddt.Float64, left, 4)
	if err != nil {
		return "", err
	}
	rb, err := c.IrecvTyped(endpoint.AsBytes(gaps), 1, twoBigRecv, left, 5)
	if err != nil {
		return "", err
	}
	if err := c.SendTyped(ctx, endpoint.AsBytes(src), 1, every, right, 4); err != nil {
		return "", fmt.Errorf("large typed send (small blocks): %w", err)
	}
	if err := c.SendTyped(ctx, endpoint.AsBytes(src), 1, twoBig, right, 5); err != nil {
		return "", fmt.Errorf("large typed send (big blocks): %w", err)
	}
	if err := endpoint.WaitAll(ctx, rs, rb); err != nil {
		return "", fmt.Errorf("large typed receives: %w", err)
	}
	for i, v := range flat {
		if want := float64(left*1_000_000 + 2*i); v != want {
			return "", fmt.Errorf("large typed (small blocks) from rank %d: element %d = %v, want %v", left, i, v, want)
		}
	}
	for b := range 2 {
		for i := range nbig {
			if v, want := gaps[b*(nbig+3)+i], float64(left*1_000_000+b*(nbig+7)+i); v != want {
				return "", fmt.Errorf("large typed (big blocks) from rank %d: block %d element %d = %v, want %v", left, b, i, v, want)
			}
		}
	}

	phase("typed")
	// Collectives.
	coll, err := collectives.New(ctx, c)
	if err != nil {
		return "", fmt.Errorf("collectives: %w", err)
	}
	defer coll.Free()
	phase("collectives.New")
	sum := make([]float64, 2)
	if err := collectives.Allreduce(ctx, coll, []float64{float64(rank + 1), 1}, sum, collectives.Sum[float64]()); err != nil {
		return "", fmt.Errorf("allreduce: %w", err)
	}
	phase("allreduce")
	if sum[0] != float64(size*(size+1)/2) || sum[1] != float64(size) {
		return "", fmt.Errorf("allreduce: %v", sum)
	}
	b := []int32{int32(rank), -1, -2}
	if rank == size-1 {
		b = []int32{42, 43, 44}
	}
	if err := collectives.Bcast(ctx, coll, b, size-1); err != nil {
		return "", fmt.Errorf("bcast: %w", err)
	}
	if !slices.Equal(b, []int32{42, 43, 44}) {
		return "", fmt.Errorf("bcast from %d: %v", size-1, b)
	}
	send, recv := make([]int32, size), make([]int32, size)
	for i := range send {
		send[i] = int32(rank*100 + i)
	}
	if err := collectives.Alltoall(ctx, coll, send, recv); err != nil {
		return "", fmt.Errorf("alltoall: %w", err)
	}
	for i, v := range recv {
		if v != int32(i*100+rank) {
			return "", fmt.Errorf("alltoall: %v", recv)
		}
	}

	// Where a node holds several ranks, each its own process here, the
	// collectives take the hierarchy's node level: the processes of a
	// node combine through a node segment and one leader per node uses
	// the network.
	if _, ln := c.NodeLocal(); ln > 1 && !coll.Hierarchical(collectives.CollAllreduce) {
		return "", fmt.Errorf("collectives: %d ranks on this node, but Allreduce is not hierarchical", ln)
	}
	got := make([]int32, 2*size)
	if err := collectives.Allgather(ctx, coll, []int32{int32(rank), int32(10 * rank)}, got); err != nil {
		return "", fmt.Errorf("allgather: %w", err)
	}
	for r := 0; r < size; r++ {
		if got[2*r] != int32(r) || got[2*r+1] != int32(10*r) {
			return "", fmt.Errorf("allgather: %v", got)
		}
	}
	var top []float64
	if rank == size-1 {
		top = make([]float64, 1)
	}
	if err := collectives.Reduce(ctx, coll, []float64{float64(rank)}, top, collectives.Max[float64](), size-1); err != nil {
		return "", fmt.Errorf("reduce: %w", err)
	}
	if rank == size-1 && top[0] != float64(size-1) {
		return "", fmt.Errorf("reduce (max) to rank %d: %v", size-1, top)
	}
	if err := collectives.Barrier(ctx, coll); err != nil {
		return "", fmt.Errorf("barrier: %w", err)
	}

	phase("collectives")
	// Onesided: every rank puts 8 bytes at offset 8*rank of every rank's
	// window; a fence completes them.
	win, err := onesided.Allocate(ctx, c, 8*size)
	if err != nil {
		return "", fmt.Errorf("window: %w", err)
	}
	phase("allocate")
	for t := range size {
		if win.Direct(t) != (string(all[t]) == host) {
			win.Free(ctx)
			return "", fmt.Errorf("window: direct store to rank %d (on %s) is %v", t, all[t], win.Direct(t))
		}
		v := []byte{byte(rank), byte(t), 0xa5, 0, 0, 0, 0, byte(rank + t)}
		if err := win.Put(t, 8*rank, v); err != nil {
			win.Free(ctx)
			return "", fmt.Errorf("put to %d: %w", t, err)
		}
	}
	if err := win.Fence(ctx); err != nil {
		win.Free(ctx)
		return "", fmt.Errorf("fence: %w", err)
	}
	phase("puts and fence")
	mem := win.Bytes()
	for s := range size {
		if got, want := mem[8*s:8*s+8], []byte{byte(s), byte(rank), 0xa5, 0, 0, 0, 0, byte(s + rank)}; !slices.Equal(got, want) {
			win.Free(ctx)
			return "", fmt.Errorf("window: bytes %v from rank %d, want %v", got, s, want)
		}
	}
	if err := win.Free(ctx); err != nil {
		return "", fmt.Errorf("window free: %w", err)
	}
	phase("onesided")
	if err := c.Barrier(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("rank %d of %d on %s: hybrid ok (node %v net %v provider %s)", rank, size, host, node, net, prov), nil
}
