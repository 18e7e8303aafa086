package fabric

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Two processes: the test re-executes its own binary as a child with
// WEFT_FABRIC_CHILD=<provider>; the two exchange endpoint names (and the
// child's RMA window) as text lines over the child's stdin and stdout.

type proc struct {
	info *Info
	fab  *Fabric
	dom  *Domain
	cq   *CQ
	av   *AV
	ep   *Endpoint
	// pending holds completions read while retrying a post.
	pending []Completion
}

func openProc(prov string) (*proc, error) {
	infos, err := GetInfo(&Hints{Provider: prov, Caps: CapMsg | CapTagged | CapRMA | CapAtomic | CapRemoteCQData})
	if err != nil {
		return nil, err
	}
	p := &proc{info: infos[0]}
	if p.fab, err = OpenFabric(p.info); err != nil {
		return nil, err
	}
	if p.dom, err = p.fab.OpenDomain(p.info); err != nil {
		return nil, err
	}
	if p.cq, err = p.dom.OpenCQ(64); err != nil {
		return nil, err
	}
	if p.av, err = p.dom.OpenAV(2); err != nil {
		return nil, err
	}
	if p.ep, err = p.dom.OpenEndpoint(p.info, p.cq, p.av); err != nil {
		return nil, err
	}
	return p, nil
}

// next waits for one completion (or error) on p.cq.
func (p *proc) next(ctx context.Context) (Completion, error) {
	if len(p.pending) > 0 {
		c := p.pending[0]
		p.pending = p.pending[1:]
		return c, nil
	}
	var out [1]Completion
	_, err := p.cq.Poll(ctx, out[:])
	return out[0], err
}

// post retries op while it reports ErrAgain.
func (p *proc) post(ctx context.Context, op func() error) error {
	for {
		err := op()
		if !errors.Is(err, ErrAgain) {
			return err
		}
		var buf [4]Completion
		n, err := p.cq.Read(buf[:])
		if err != nil {
			return err
		}
		p.pending = append(p.pending, buf[:n]...)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func childMain(prov string) int {
	if err := child(prov); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func child(prov string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := openProc(prov)
	if err != nil {
		return err
	}
	defer p.fab.Close()
	win, err := p.dom.Alloc(4096)
	if err != nil {
		return err
	}
	name, err := p.ep.Name()
	if err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		return err
	}
	peer, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil {
		return err
	}
	ad, err := p.av.Insert(peer)
	if err != nil {
		return err
	}
	rbuf := make([]byte, 64)
	rmr, err := p.dom.Register(rbuf, AccessRecv|AccessSend)
	if err != nil {
		return err
	}
	if err := p.post(ctx, func() error { return p.ep.TRecv(rbuf, rmr.Desc(), AddrUnspec, 1, 0, 1) }); err != nil {
		return err
	}
	fmt.Printf("%s %d %d\n", hex.EncodeToString(name), win.MR().RemoteAddr(win.Bytes()), win.MR().Key())
	// 1: ping, answered with tag 2.
	c, err := p.next(ctx)
	if err != nil {
		return err
	}
	if c.Tag != 1 || string(rbuf[:c.Len]) != "ping" {
		return fmt.Errorf("ping: %+v %q", c, rbuf[:c.Len])
	}
	pong := append([]byte("pong:"), rbuf[:c.Len]...)
	var pin runtime.Pinner // Go memory libfabric keeps must be pinned
	defer pin.Unpin()
	pin.Pin(&pong[0])
	if err := p.post(ctx, func() error { return p.ep.TSend(pong, 0, ad[0], 2, 2) }); err != nil {
		return err
	}
	if c, err = p.next(ctx); err != nil || c.Context != 2 {
		return fmt.Errorf("pong send: %+v %v", c, err)
	}
	// 2: the parent writes the window with remote CQ data 0xabc.
	if c, err = p.next(ctx); err != nil {
		return err
	}
	if c.Flags&CompRemoteCQData == 0 || c.Data != 0xabc {
		return fmt.Errorf("writedata completion %+v", c)
	}
	for i, b := range win.Bytes() {
		if b != byte(i*3) {
			return fmt.Errorf("window byte %d = %d after writedata", i, b)
		}
	}
	// Tell the parent the data landed (without RAW ordering the parent
	// may not read the window before that).
	ok := []byte("ok")
	pin.Pin(&ok[0])
	if err := p.post(ctx, func() error { return p.ep.TSend(ok, 0, ad[0], 3, 3) }); err != nil {
		return err
	}
	if c, err = p.next(ctx); err != nil || c.Context != 3 {
		return fmt.Errorf("ok send: %+v %v", c, err)
	}
	// 3: keep progressing (the parent reads the window back) until "bye".
	if err := p.post(ctx, func() error { return p.ep.TRecv(rbuf, rmr.Desc(), AddrUnspec, 4, 0, 4) }); err != nil {
		return err
	}
	if c, err = p.next(ctx); err != nil || c.Context != 4 || string(rbuf[:c.Len]) != "bye" {
		return fmt.Errorf("bye: %+v %v", c, err)
	}
	return nil
}

func TestTwoProcesses(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := openProc(prov)
			skipNoProvider(t, prov, err)
			defer p.fab.Close()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "WEFT_FABRIC_CHILD="+prov)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := cmd.Wait(); err != nil {
					t.Errorf("child: %v\n%s", err, stderr.String())
				}
			}()
			name, err := p.ep.Name()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(stdin, "%s\n", hex.EncodeToString(name))
			var childName string
			var raddr, key uint64
			if _, err := fmt.Fscanf(stdout, "%s %d %d\n", &childName, &raddr, &key); err != nil {
				t.Fatalf("reading child's address: %v\n%s", err, stderr.String())
			}
			go io.Copy(io.Discard, stdout)
			peer, _ := hex.DecodeString(childName)
			ad, err := p.av.Insert(peer)
			if err != nil {
				t.Fatal(err)
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%v\nchild: %s", err, stderr.String())
				}
			}
			rbuf := pinned(t, make([]byte, 64))
			ping, bye := pinned(t, []byte("ping")), pinned(t, []byte("bye"))
			must(p.post(ctx, func() error { return p.ep.TRecv(rbuf, 0, ad[0], 2, 0, 20) }))
			must(p.post(ctx, func() error { return p.ep.TSend(ping, 0, ad[0], 1, 10) }))
			got := map[uint64]Completion{}
			for len(got) < 2 {
				c, err := p.next(ctx)
				must(err)
				got[c.Context] = c
			}
			if c := got[20]; string(rbuf[:c.Len]) != "pong:ping" || c.Tag != 2 {
				t.Fatalf("pong: %+v %q", c, rbuf[:c.Len])
			}
			src, err := p.dom.Alloc(4096)
			must(err)
			for i := range src.Bytes() {
				src.Bytes()[i] = byte(i * 3)
			}
			must(p.post(ctx, func() error {
				return p.ep.WriteData(src.Bytes(), src.Desc(), 0xabc, ad[0], raddr, key, 30)
			}))
			must(p.post(ctx, func() error { return p.ep.TRecv(rbuf, 0, ad[0], 3, 0, 31) }))
			got = map[uint64]Completion{}
			for len(got) < 2 {
				c, err := p.next(ctx)
				must(err)
				got[c.Context] = c
			}
			if c, ok := got[31]; !ok || string(rbuf[:c.Len]) != "ok" {
				t.Fatalf("child's confirmation: %+v", got)
			}
			if _, ok := got[30]; !ok {
				t.Fatalf("no writedata completion: %+v", got)
			}
			back, err := p.dom.Alloc(4096)
			must(err)
			must(p.post(ctx, func() error { return p.ep.Read(back.Bytes(), back.Desc(), ad[0], raddr, key, 40) }))
			c, err := p.next(ctx)
			must(err)
			if c.Context != 40 || !bytes.Equal(back.Bytes(), src.Bytes()) {
				t.Fatalf("read back: %+v equal=%v", c, bytes.Equal(back.Bytes(), src.Bytes()))
			}
			// Cross-process fetch-add on the child's window, then read back.
			loc, err := p.dom.Alloc(16)
			must(err)
			old := binary.LittleEndian.Uint64(src.Bytes()[:8])
			binary.LittleEndian.PutUint64(loc.Bytes()[:8], 5)
			must(p.post(ctx, func() error {
				return p.ep.FetchAtomic(loc.Bytes()[:8], loc.Desc(), loc.Bytes()[8:16], loc.Desc(), Uint64, OpSum, ad[0], raddr, key, 60)
			}))
			c, err = p.next(ctx)
			must(err)
			if c.Context != 60 || binary.LittleEndian.Uint64(loc.Bytes()[8:16]) != old {
				t.Fatalf("fetch-add: %+v fetched %d, want %d", c, binary.LittleEndian.Uint64(loc.Bytes()[8:16]), old)
			}
			must(p.post(ctx, func() error { return p.ep.Read(back.Bytes()[:8], back.Desc(), ad[0], raddr, key, 61) }))
			c, err = p.next(ctx)
			must(err)
			if got := binary.LittleEndian.Uint64(back.Bytes()[:8]); c.Context != 61 || got != old+5 {
				t.Fatalf("after fetch-add the window holds %d, want %d", got, old+5)
			}
			must(p.post(ctx, func() error { return p.ep.TSend(bye, 0, ad[0], 4, 50) }))
			c, err = p.next(ctx)
			must(err)
			if c.Context != 50 {
				t.Fatalf("bye completion %+v", c)
			}
			// Keep progressing until the child is gone (rxm needs it to
			// finish its side of the last message).
			for i := 0; i < 100; i++ {
				p.cq.Read(make([]Completion, 1))
				time.Sleep(time.Millisecond)
			}
		})
	}
}
