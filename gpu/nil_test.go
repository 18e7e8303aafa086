package gpu

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weft-hpc/weft/errs"
)

// TestNilReceivers: every exported method on a nil or zero *Device,
// *Buffer or *Event, and every call handed one, returns an error wrapping
// errs.ErrInvalid (or, for methods without an error, a zero answer)
// instead of panicking.
func TestNilReceivers(t *testing.T) {
	ctx := context.Background()
	d := newSimDevice()
	defer d.Close()
	good, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	ty := seedLayouts(t, 4)[0]
	for _, dev := range []*Device{nil, {}} {
		for _, b := range []*Buffer{nil, {}} {
			for _, e := range []*Event{nil, {}} {
				calls := map[string]func() error{
					"Device.Close":     dev.Close,
					"Device.Alloc":     func() error { _, err := dev.Alloc(8); return err },
					"Device.AllocHost": func() error { _, err := dev.AllocHost(8); return err },
					"Device.MapHost":   func() error { _, err := dev.MapHost(make([]byte, 8)); return err },
					"Device.Pack":      func() error { _, err := dev.Pack(ctx, good, 0, Typed{ty, good, 0, 1}, 0, 8); return err },
					"Device.Unpack":    func() error { _, err := dev.Unpack(ctx, Typed{ty, good, 0, 1}, good, 0, 0, 8); return err },
					"Device.PackAsync": func() error {
						_, err := dev.PackAsync(ctx, good, 0, Typed{ty, good, 0, 1}, 0, 8)
						return err
					},
					"Device.UnpackAsync": func() error {
						_, err := dev.UnpackAsync(ctx, Typed{ty, good, 0, 1}, good, 0, 0, 8)
						return err
					},
					"Device.PackBytes":   func() error { _, err := dev.PackBytes(ctx, make([]byte, 8), Typed{ty, good, 0, 1}, 0); return err },
					"Device.UnpackBytes": func() error { _, err := dev.UnpackBytes(ctx, Typed{ty, good, 0, 1}, make([]byte, 8), 0); return err },
					"Device.Prepare":     func() error { return dev.Prepare(ty) },
					"Device.SetMethod":   func() error { return dev.SetMethod(MethodAuto) },
					"Buffer.Free":        b.Free,
					"Buffer.Write":       func() error { return b.Write(0, make([]byte, 8)) },
					"Buffer.Read":        func() error { return b.Read(0, make([]byte, 8)) },
					"Typed.Check":        func() error { _, err := Typed{ty, b, 0, 1}.Check(); return err },
					"Typed.Contiguous":   func() error { _, _, err := Typed{ty, b, 0, 1}.Contiguous(); return err },
					"Pack into it":       func() error { _, err := d.Pack(ctx, b, 0, Typed{ty, good, 0, 1}, 0, 8); return err },
					"Pack from it":       func() error { _, err := d.Pack(ctx, good, 0, Typed{ty, b, 0, 1}, 0, 8); return err },
					"PackBytes from it":  func() error { _, err := d.PackBytes(ctx, make([]byte, 8), Typed{ty, b, 0, 1}, 0); return err },
					"Event.Done":         func() error { _, err := e.Done(); return err },
					"Event.Wait":         func() error { return e.Wait(ctx) },
				}
				for name, call := range calls {
					err := func() (err error) {
						defer func() {
							if p := recover(); p != nil {
								err = fmt.Errorf("panic: %v", p)
							}
						}()
						return call()
					}()
					if !errors.Is(err, errs.ErrInvalid) {
						t.Errorf("%s (device %p, buffer %p, event %p): %v, want ErrInvalid", name, dev, b, e, err)
					}
				}
				if dev.Kind() != "" || dev.Integrated() || dev.Stats() != (Stats{}) || dev.String() == "" ||
					b.Device() != nil || b.Len() != 0 || b.Bytes() != nil || e.Len() != 0 {
					t.Errorf("an accessor of a nil or zero value returned something")
				}
				if _, _, ok := b.CUDAPointer(); ok {
					t.Errorf("CUDAPointer of a nil or zero Buffer: ok")
				}
			}
		}
	}
}
