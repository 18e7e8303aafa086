package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestHammerEndpoints runs several endpoint pairs in one domain from
// separate goroutines (one goroutine per pair, as endpoint/ uses them).
func TestHammerEndpoints(t *testing.T) {
	infos, err := GetInfo(&Hints{Provider: "shm", Caps: CapMsg | CapTagged, Threading: ThreadSafe})
	skipNoProvider(t, "shm", err)
	info := infos[0]
	fab, err := OpenFabric(info)
	if err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(info)
	if err != nil {
		t.Fatal(err)
	}
	const pairs, msgs = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, pairs)
	for g := 0; g < pairs; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			if err := hammerPair(dom, info, g, msgs); err != nil {
				errs <- fmt.Errorf("pair %d: %w", g, err)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func hammerPair(dom *Domain, info *Info, g, msgs int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var eps [2]*Endpoint
	var cqs [2]*CQ
	av, err := dom.OpenAV(2)
	if err != nil {
		return err
	}
	for i := range eps {
		if cqs[i], err = dom.OpenCQ(64); err != nil {
			return err
		}
		if eps[i], err = dom.OpenEndpoint(info, cqs[i], av); err != nil {
			return err
		}
	}
	n0, _ := eps[0].Name()
	n1, _ := eps[1].Name()
	ad, err := av.Insert(n0, n1)
	if err != nil {
		return err
	}
	rbuf := make([]byte, 16)
	var pin runtime.Pinner
	pin.Pin(&rbuf[0])
	defer pin.Unpin()
	var out [4]Completion
	for m := 0; m < msgs; m++ {
		for {
			err := eps[1].TRecv(rbuf, 0, AddrUnspec, uint64(m), 0, uint64(m))
			if err == nil {
				break
			}
			if !errors.Is(err, ErrAgain) {
				return err
			}
			cqs[1].Read(nil)
		}
		want := []byte(fmt.Sprintf("g%d m%d", g, m))
		for {
			err := eps[0].TInject(want, ad[1], uint64(m))
			if err == nil {
				break
			}
			if !errors.Is(err, ErrAgain) {
				return err
			}
			cqs[0].Read(nil) // progress only
			cqs[1].Read(nil)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		for {
			n, err := cqs[1].Read(out[:1])
			if err != nil {
				return err
			}
			if n == 1 {
				if out[0].Context != uint64(m) || !bytes.Equal(rbuf[:out[0].Len], want) {
					return fmt.Errorf("message %d: %+v %q", m, out[0], rbuf[:out[0].Len])
				}
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	for _, e := range eps {
		if err := e.Close(); err != nil {
			return err
		}
	}
	for _, c := range cqs {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return av.Close()
}
