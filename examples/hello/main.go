// Command hello is weft's smallest complete program: every rank opens a
// libfabric endpoint on the selected provider, publishes its address through
// the job's key-value exchange (package job), fences, reads every peer's
// address, and passes a token around a ring over libfabric. Each rank then prints
//
//	rank R of N on HOST: ring ok
//
// (followed by ", program K" for the ranks of the K-th program, K > 0, of
// an MPMD job: fabrun -n 1 hello : -n 2 hello). Run it with any launcher weft supports:
//
//	fabrun -n 4 --provider shm --tag-output hello
//	mpiexec.hydra -n 3 hello
//	srun --mpi=pmi2 -n 2 hello
//	hello                       (a singleton ring of one)
//
// The provider comes from WEFT_PROVIDER (fabrun --provider sets it), else
// shm when all ranks share a node, else the first of verbs;ofi_rxm, efa,
// tcp;ofi_rxm and sockets whose endpoint opens (fabric.SelectOpen).
// WEFT_HELLO_TIMEOUT (default 60s) bounds the whole run.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/job"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "hello: %v\n", err)
		os.Exit(1)
	}
}

const (
	ctxRecv = 1
	ctxSend = 2
)

func run() error {
	timeout := 60 * time.Second
	if v := os.Getenv("WEFT_HELLO_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("WEFT_HELLO_TIMEOUT=%q: %w", v, err)
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	j, err := job.Init(ctx)
	if err != nil {
		return err
	}
	rank, size := j.Rank(), j.Size()
	fail := func(err error) error {
		_ = j.Abort(1, err.Error())
		return err
	}

	// The first provider (in fabric.Candidates order) whose endpoint opens
	// and enables: a provider that matches but fails here (a verbs device
	// that cannot open rxm's queues) is passed over for the next.
	var f fab
	_, err = fabric.SelectOpen(&fabric.Hints{Caps: fabric.CapMsg, JobSize: size}, j.LocalSize() == size, func(info *fabric.Info) error {
		return f.open(info, size)
	})
	if err != nil {
		return fail(err)
	}
	defer f.close()
	dom, cq, av, ep := f.dom, f.cq, f.av, f.ep

	// Publish this endpoint's (binary) address; read everyone's.
	name, err := ep.Name()
	if err != nil {
		return fail(err)
	}
	if err := j.Put("hello.ep."+strconv.Itoa(rank), name); err != nil {
		return fail(err)
	}
	if err := j.Fence(ctx); err != nil {
		return fail(err)
	}
	names := make([][]byte, size)
	for r := range size {
		if names[r], err = j.Get(ctx, "hello.ep."+strconv.Itoa(r)); err != nil {
			return fail(err)
		}
	}
	addrs, err := av.Insert(names...)
	if err != nil {
		return fail(err)
	}

	sendBuf, err := dom.Alloc(8)
	if err != nil {
		return fail(err)
	}
	defer sendBuf.Close()
	recvBuf, err := dom.Alloc(8)
	if err != nil {
		return fail(err)
	}
	defer recvBuf.Close()

	// The token counts hops: rank r receives r (rank 0 receives size at the
	// end) and sends r+1 to the right.
	right := addrs[(rank+1)%size]
	if err := ep.Recv(recvBuf.Bytes(), recvBuf.Desc(), fabric.AddrUnspec, ctxRecv); err != nil {
		return fail(fmt.Errorf("post receive: %w", err))
	}
	var got struct{ recv, send bool }
	send := func(v uint64) error {
		binary.LittleEndian.PutUint64(sendBuf.Bytes(), v)
		err := retrySend(ctx, cq, &got, func() error {
			return ep.Send(sendBuf.Bytes(), sendBuf.Desc(), right, ctxSend)
		})
		if err != nil {
			return fmt.Errorf("send to rank %d: %w", (rank+1)%size, err)
		}
		return nil
	}
	if rank == 0 {
		if err := send(1); err != nil {
			return fail(err)
		}
	}
	for !got.recv {
		if _, err := drain(ctx, cq, &got); err != nil {
			return fail(err)
		}
	}
	token := binary.LittleEndian.Uint64(recvBuf.Bytes())
	want := uint64(rank)
	if rank == 0 {
		want = uint64(size)
	}
	if token != want {
		return fail(fmt.Errorf("rank %d received token %d, want %d", rank, token, want))
	}
	if rank != 0 {
		if err := send(token + 1); err != nil {
			return fail(err)
		}
	}
	for !got.send {
		if _, err := drain(ctx, cq, &got); err != nil {
			return fail(err)
		}
	}
	// Nobody tears down its endpoint while a peer may still need it.
	if err := j.Fence(ctx); err != nil {
		return fail(err)
	}
	host, _ := os.Hostname()
	prog := ""
	if a := job.AppNum(j); a > 0 {
		prog = fmt.Sprintf(", program %d", a)
	}
	fmt.Printf("rank %d of %d on %s: ring ok%s\n", rank, size, host, prog)
	return j.Finalize()
}

// fab holds one rank's libfabric objects.
type fab struct {
	fab *fabric.Fabric
	dom *fabric.Domain
	cq  *fabric.CQ
	av  *fabric.AV
	ep  *fabric.Endpoint
}

// open opens fabric, domain, CQ, AV and an enabled endpoint on info; on
// failure it closes what it opened.
func (f *fab) open(info *fabric.Info, size int) (err error) {
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.fab, err = fabric.OpenFabric(info); err != nil {
		return err
	}
	if f.dom, err = f.fab.OpenDomain(info); err != nil {
		return err
	}
	if f.cq, err = f.dom.OpenCQ(64); err != nil {
		return err
	}
	if f.av, err = f.dom.OpenAV(size); err != nil {
		return err
	}
	f.ep, err = f.dom.OpenEndpoint(info, f.cq, f.av)
	return err
}

// close closes what open opened, in reverse order.
func (f *fab) close() {
	if f.ep != nil {
		f.ep.Close()
	}
	if f.av != nil {
		f.av.Close()
	}
	if f.cq != nil {
		f.cq.Close()
	}
	if f.dom != nil {
		f.dom.Close()
	}
	if f.fab != nil {
		f.fab.Close()
	}
	*f = fab{}
}

// cqReader is the non-blocking half of *fabric.CQ that retrySend uses.
type cqReader interface {
	Read(out []fabric.Completion) (int, error)
}

// retrySend posts with post until the provider stops answering ErrAgain.
// In between it reads the CQ once without waiting: that drives the
// provider's progress (shm answers ErrAgain to the first send to a peer
// until its connection request has been handled) and records completions
// in got. Waiting for a completion instead would stall every refused send
// for the whole wait, since the refused send itself never completes.
func retrySend(ctx context.Context, cq cqReader, got *struct{ recv, send bool }, post func() error) error {
	var comps [8]fabric.Completion
	for {
		err := post()
		if err == nil || !errors.Is(err, fabric.ErrAgain) {
			return err
		}
		n, err := cq.Read(comps[:])
		if err != nil {
			return fmt.Errorf("completion queue: %w", err)
		}
		record(comps[:n], got)
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
	}
}

// drain polls the CQ once (waiting up to a short while for a completion) and
// records which operations finished.
func drain(ctx context.Context, cq *fabric.CQ, got *struct{ recv, send bool }) (int, error) {
	var comps [8]fabric.Completion
	pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	n, err := cq.Poll(pctx, comps[:])
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return 0, nil
		}
		return 0, fmt.Errorf("completion queue: %w", err)
	}
	record(comps[:n], got)
	return n, nil
}

// record notes in got which operations the completions cs finished.
func record(cs []fabric.Completion, got *struct{ recv, send bool }) {
	for _, c := range cs {
		switch c.Context {
		case ctxRecv:
			got.recv = true
		case ctxSend:
			got.send = true
		}
	}
}
