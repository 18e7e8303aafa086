package ddt_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	. "github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// TestNilReceivers calls every exported method of the package's pointer
// types on a nil receiver: each returns an error wrapping ErrInvalid, or a
// documented zero value for a pure getter, and none panics. The method list
// is checked against reflection so a new method cannot be forgotten.
func TestNilReceivers(t *testing.T) {
	var ty *Type
	var c *Cursor
	var ir *ddtir.IR
	var n *ddtir.Node
	buf := make([]byte, 8)
	isInvalid := func(err error) error {
		if !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("error %v does not wrap ErrInvalid", err)
		}
		return nil
	}
	zero := func(got, want any) error {
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("got %#v, want %#v", got, want)
		}
		return nil
	}
	calls := map[string]func() error{
		"Type.Name":       func() error { return zero(ty.Name(), "<nil>") },
		"Type.String":     func() error { return zero(ty.String(), "<nil>") },
		"Type.Size":       func() error { return zero(ty.Size(), int64(0)) },
		"Type.Extent":     func() error { return zero(ty.Extent(), int64(0)) },
		"Type.LB":         func() error { return zero(ty.LB(), int64(0)) },
		"Type.UB":         func() error { return zero(ty.UB(), int64(0)) },
		"Type.TrueLB":     func() error { return zero(ty.TrueLB(), int64(0)) },
		"Type.TrueExtent": func() error { return zero(ty.TrueExtent(), int64(0)) },
		"Type.Combiner":   func() error { return zero(ty.Combiner(), Combiner(0)) },
		"Type.Envelope": func() error {
			a, b, c, d := ty.Envelope()
			return zero([]any{a, b, c, d}, []any{0, 0, 0, Combiner(0)})
		},
		"Type.Contents":    func() error { return zero(ty.Contents(), Contents{}) },
		"Type.Commit":      func() error { return isInvalid(ty.Commit()) },
		"Type.Committed":   func() error { return zero(ty.Committed(), false) },
		"Type.DumpIR":      func() error { return zero(ty.DumpIR(), "") },
		"Type.Compiled":    func() error { return zero(ty.Compiled(), false) },
		"Type.JITPending":  func() error { return zero(ty.JITPending(), false) },
		"Type.SetJIT":      func() error { return isInvalid(ty.SetJIT(JITOff)) },
		"Type.CheckBounds": func() error { return isInvalid(ty.CheckBounds(1, 8)) },
		"Type.PackSize": func() error {
			_, err := ty.PackSize(1)
			return isInvalid(err)
		},
		"Type.Pack": func() error {
			_, err := ty.Pack(buf, buf, 1)
			return isInvalid(err)
		},
		"Type.Unpack": func() error {
			_, err := ty.Unpack(buf, buf, 1)
			return isInvalid(err)
		},
		"Type.PackRange": func() error {
			_, err := ty.PackRange(buf, buf, 0, 1, 0)
			return isInvalid(err)
		},
		"Type.UnpackRange": func() error {
			_, err := ty.UnpackRange(buf, buf, 0, 1, 0)
			return isInvalid(err)
		},
		"Type.Interpreter": func() error {
			_, err := ty.Interpreter()
			return isInvalid(err)
		},
		"Type.NewPacker": func() error {
			_, err := ty.NewPacker(buf, 0, 1)
			return isInvalid(err)
		},
		"Type.NewUnpacker": func() error {
			_, err := ty.NewUnpacker(buf, 0, 1)
			return isInvalid(err)
		},
		"Type.SigOf": func() error {
			_, err := ty.SigOf(1, 0)
			return isInvalid(err)
		},
		"Type.Signature": func() error {
			_, err := ty.Signature(1, 0)
			return isInvalid(err)
		},
		"Type.Blocks": func() error {
			_, err := ty.Blocks(1)
			return isInvalid(err)
		},
		"Type.Flatten": func() error {
			_, err := ty.Flatten(1, 0)
			return isInvalid(err)
		},
		"Type.ExceedsSegments": func() error { return zero(ty.ExceedsSegments(1, 1), false) },
		"Type.OneSegment": func() error {
			_, _, err := ty.OneSegment(1)
			return isInvalid(err)
		},
		"Type.AppendSegments": func() error {
			_, err := ty.AppendSegments(nil, 1, 0)
			return isInvalid(err)
		},
		"Cursor.Next": func() error {
			_, err := c.Next(buf)
			return isInvalid(err)
		},
		"Cursor.Offset":    func() error { return zero(c.Offset(), int64(0)) },
		"Cursor.Remaining": func() error { return zero(c.Remaining(), int64(0)) },
		"Cursor.Done":      func() error { return zero(c.Done(), true) },
		"Cursor.SetOffset": func() error { return isInvalid(c.SetOffset(0)) },
		"IR.String":        func() error { return zero(ir.String(), "<nil>") },
		"Node.String":      func() error { return zero(n.String(), "<nil>") },
		"Node.Walk": func() error {
			called := false
			n.Walk(func(*ddtir.Node) { called = true })
			return zero(called, false)
		},
		"Node.Nodes": func() error { return zero(n.Nodes(), 0) },
	}
	for _, rt := range []reflect.Type{reflect.TypeOf(ty), reflect.TypeOf(c), reflect.TypeOf(ir), reflect.TypeOf(n)} {
		for i := range rt.NumMethod() {
			name := rt.Elem().Name() + "." + rt.Method(i).Name
			if _, ok := calls[name]; !ok {
				t.Errorf("method %s has no nil-receiver case", name)
			}
		}
	}
	for name, call := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s on a nil receiver panicked: %v", name, r)
				}
			}()
			if err := call(); err != nil {
				t.Errorf("%s on a nil receiver: %v", name, err)
			}
		}()
	}
}
