package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// TestNilReceivers: every exported method on a nil *World, *Comm or
// *Request returns an error wrapping ErrInvalid (or, for methods without
// an error, a zero answer) instead of panicking. Freeing a nil
// communicator (what Split returns for Undefined) is a no-op.
func TestNilReceivers(t *testing.T) {
	ctx := context.Background()
	var (
		w *endpoint.World
		c *endpoint.Comm
		r *endpoint.Request
	)
	buf := make([]byte, 8)
	calls := map[string]func() error{
		"World.Close": w.Close,
		"Comm.Dup":    func() error { _, err := c.Dup(ctx); return err },
		"Comm.Split":  func() error { _, err := c.Split(ctx, 0, 0); return err },
		"Comm.SplitType": func() error {
			_, err := c.SplitType(ctx, endpoint.SplitNode, 0)
			return err
		},
		"Comm.Create": func() error { _, err := c.Create(ctx, nil); return err },
		"Comm.IntercommCreate": func() error {
			_, err := c.IntercommCreate(ctx, 0, nil, 0, 0)
			return err
		},
		"Comm.Merge":       func() error { _, err := c.Merge(ctx, false); return err },
		"Comm.CreateGroup": func() error { _, err := c.CreateGroup(ctx, nil, 0); return err },
		"Comm.Barrier":     func() error { return c.Barrier(ctx) },
		"Comm.Allgather": func() error {
			_, err := c.Allgather(ctx, buf)
			return err
		},
		"Comm.CreateEndpoints": func() error { _, err := c.CreateEndpoints(ctx, 1); return err },
		"Comm.Isend":           func() error { _, err := c.Isend(buf, 0, 0); return err },
		"Comm.Irecv":           func() error { _, err := c.Irecv(buf, 0, 0); return err },
		"Comm.Send":            func() error { return c.Send(ctx, buf, 0, 0) },
		"Comm.Recv":            func() error { _, err := c.Recv(ctx, buf, 0, 0); return err },
		"Comm.Iprobe":          func() error { _, _, err := c.Iprobe(0, 0); return err },
		"Comm.Probe":           func() error { _, err := c.Probe(ctx, 0, 0); return err },
		"Comm.SendrecvReplace": func() error {
			_, err := c.SendrecvReplace(ctx, buf, 1, ddt.Byte, 0, 0, 0, 0)
			return err
		},
		"Comm.Issend":   func() error { _, err := c.Issend(buf, 0, 0); return err },
		"Comm.Ssend":    func() error { return c.Ssend(ctx, buf, 0, 0) },
		"Comm.Improbe":  func() error { _, _, err := c.Improbe(0, 0); return err },
		"Comm.Mprobe":   func() error { _, err := c.Mprobe(ctx, 0, 0); return err },
		"Message.Mrecv": func() error { _, err := (*endpoint.Message)(nil).Mrecv(ctx, buf); return err },
		"Message.ImrecvTyped": func() error {
			_, err := (*endpoint.Message)(nil).ImrecvTyped(buf, 1, ddt.Byte)
			return err
		},
		"SendSlice":      func() error { return endpoint.SendSlice(ctx, c, []int32{1}, 0, 0) },
		"RecvSlice":      func() error { _, err := endpoint.RecvSlice(ctx, c, []int32{1}, 0, 0); return err },
		"IsendSlice":     func() error { _, err := endpoint.IsendSlice(c, []int32{1}, 0, 0); return err },
		"IrecvSlice":     func() error { _, err := endpoint.IrecvSlice(c, []int32{1}, 0, 0); return err },
		"Request.Test":   func() error { _, _, err := r.Test(); return err },
		"Request.Wait":   func() error { _, err := r.Wait(ctx); return err },
		"Request.Cancel": r.Cancel,
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return call()
			}()
			if !errors.Is(err, endpoint.ErrInvalid) {
				t.Errorf("%s on nil: %v, want ErrInvalid", name, err)
			}
		})
	}
	lr, ls := c.NodeLocal()
	if w.Comm() != nil || w.Job() != nil || w.Info() != nil ||
		c.Rank() != -1 || c.Size() != 0 || c.ContextID() != -1 || c.Info() != nil ||
		c.Domain() != nil || c.Shared() || lr != -1 || ls != 0 || !r.Done() ||
		c.Group() != nil || c.Group().Size() != 0 || c.Group().Rank() != endpoint.Undefined ||
		c.IsInter() || c.RemoteSize() != 0 || c.RemoteGroup() != nil {
		t.Error("a nil receiver's accessor returned something")
	}
	if err := c.Free(); err != nil {
		t.Errorf("Free of a nil communicator: %v", err)
	}
	if err := endpoint.WaitAll(ctx, nil, r); err != nil {
		t.Errorf("WaitAll of nil requests: %v", err)
	}
}
