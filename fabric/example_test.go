package fabric_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/weft-hpc/weft/fabric"
)

// Two endpoints in one process exchange a tagged message over shm, then one
// writes into memory the other registered.
func Example() {
	info, err := fabric.Select(&fabric.Hints{Provider: "shm", Caps: fabric.CapMsg | fabric.CapTagged | fabric.CapRMA}, true)
	if err != nil {
		log.Fatal(err)
	}
	fab, err := fabric.OpenFabric(info)
	if err != nil {
		log.Fatal(err)
	}
	defer fab.Close() // closes the domain and everything opened from it
	dom, err := fab.OpenDomain(info)
	if err != nil {
		log.Fatal(err)
	}
	av, err := dom.OpenAV(2) // shared by both endpoints
	if err != nil {
		log.Fatal(err)
	}
	var eps [2]*fabric.Endpoint
	var cqs [2]*fabric.CQ
	var names [2][]byte
	for i := range eps {
		if cqs[i], err = dom.OpenCQ(64); err != nil {
			log.Fatal(err)
		}
		if eps[i], err = dom.OpenEndpoint(info, cqs[i], av); err != nil {
			log.Fatal(err)
		}
		if names[i], err = eps[i].Name(); err != nil {
			log.Fatal(err)
		}
	}
	addrs, err := av.Insert(names[0], names[1]) // addrs[i] reaches eps[i]
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// wait reads both CQs (shm moves data when its CQ is read) until cq
	// yields a completion. In this example the other CQ has nothing the
	// caller needs, so what it yields is dropped.
	var sink [1]fabric.Completion
	wait := func(cq *fabric.CQ) fabric.Completion {
		var out [1]fabric.Completion
		for ctx.Err() == nil {
			n, err := cq.Read(out[:])
			if err != nil {
				log.Fatal(err)
			}
			if n == 1 {
				return out[0]
			}
			for _, other := range cqs {
				if other != cq {
					other.Read(sink[:])
				}
			}
		}
		log.Fatal(ctx.Err())
		return fabric.Completion{}
	}
	// retry repeats an operation while the provider says "again".
	retry := func(op func() error) {
		for {
			err := op()
			if !errors.Is(err, fabric.ErrAgain) {
				if err != nil {
					log.Fatal(err)
				}
				return
			}
			cqs[1].Read(sink[:])
		}
	}

	// Tagged message: post the receive, send, read both completions.
	// The receive buffer is kept by libfabric until the completion, so it
	// is off-heap memory from Alloc (Go memory would have to be pinned).
	rmem, err := dom.Alloc(32)
	if err != nil {
		log.Fatal(err)
	}
	rbuf := rmem.Bytes()
	retry(func() error { return eps[1].TRecv(rbuf, rmem.Desc(), fabric.AddrUnspec, 42, 0, 1) })
	retry(func() error { return eps[0].TInject([]byte("hello, weft"), addrs[1], 42) })
	c := wait(cqs[1])
	fmt.Printf("tag %d: %s\n", c.Tag, rbuf[:c.Len])

	// RMA write into registered Go memory.
	window := make([]byte, 64)
	mr, err := dom.Register(window, fabric.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	src, err := dom.Alloc(5) // off-heap and registered
	if err != nil {
		log.Fatal(err)
	}
	copy(src.Bytes(), "remote")
	retry(func() error {
		return eps[0].Write(src.Bytes(), src.Desc(), addrs[1], mr.RemoteAddr(window[8:13]), mr.Key(), 2)
	})
	wait(cqs[0])
	for string(window[8:13]) != "remot" { // visible once the target progresses
		cqs[1].Read(sink[:])
	}
	fmt.Printf("window: %s\n", window[8:13])
	// Output:
	// tag 42: hello, weft
	// window: remot
}

// Fast calls, the poll pace and the poll yield are chosen per domain when it
// opens; a program that wants every call of one domain to go through cgo
// (for instance to keep cgo's pointer checks on all batches while
// debugging) says so in its options. Options left out take the process-wide
// defaults (WEFT_FASTCALL, WEFT_TUNE, SetFastCall, SetPollPace,
// SetPollYield).
func ExampleWithFastCall() {
	info, err := fabric.Select(&fabric.Hints{Provider: "shm", Caps: fabric.CapMsg}, true)
	if err != nil {
		log.Fatal(err)
	}
	fab, err := fabric.OpenFabric(info)
	if err != nil {
		log.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(info, fabric.WithFastCall(fabric.FastCallOff), fabric.WithPollPace(0))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fast calls:", dom.FastCall(), "pace:", dom.PollPace())
	// Output:
	// fast calls: off pace: 0
}
