package ddt_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// This file plays user code: it may use only ddt's public API (no hooks of
// export_test.go, no internal packages).

// TestGuardStateUnreachable walks the result types of every exported
// function and method of package ddt: no result may lead to a struct with
// exported fields through a pointer, since such a struct would be shared
// with the package and writable by the caller (the IR that the bounds check
// reads was once reachable this way). Structs returned by value or in fresh
// slices (Segment, Contents) are copies; TestGuardSurvivesMutation mutates
// them.
func TestGuardStateUnreachable(t *testing.T) {
	type key struct {
		rt     reflect.Type
		viaPtr bool
	}
	seen := map[key]bool{}
	var walk func(path string, rt reflect.Type, viaPtr bool)
	walk = func(path string, rt reflect.Type, viaPtr bool) {
		if seen[key{rt, viaPtr}] {
			return
		}
		seen[key{rt, viaPtr}] = true
		switch rt.Kind() {
		case reflect.Pointer:
			walk(path+"*", rt.Elem(), true)
		case reflect.Slice, reflect.Array:
			walk(path+"[]", rt.Elem(), viaPtr)
		case reflect.Map:
			walk(path+"[key]", rt.Key(), viaPtr)
			walk(path+"[val]", rt.Elem(), viaPtr)
		case reflect.Struct:
			for i := range rt.NumField() {
				f := rt.Field(i)
				if !f.IsExported() {
					continue
				}
				if viaPtr {
					t.Errorf("%s: exported field %s.%s is writable through a pointer the package hands out", path, rt, f.Name)
				}
				walk(path+"."+f.Name, f.Type, viaPtr)
			}
		}
	}
	results := func(name string, ft reflect.Type) {
		for i := range ft.NumOut() {
			walk(name, ft.Out(i), false)
		}
	}
	ty := reflect.TypeOf(ddt.Float64)
	for i := range ty.NumMethod() {
		m := ty.Method(i)
		results("Type."+m.Name, m.Type)
	}
	cur := reflect.TypeOf((*ddt.Cursor)(nil))
	for i := range cur.NumMethod() {
		m := cur.Method(i)
		results("Cursor."+m.Name, m.Type)
	}
	for name, f := range map[string]any{
		"Contiguous": ddt.Contiguous, "Vector": ddt.Vector, "HVector": ddt.HVector,
		"Indexed": ddt.Indexed, "HIndexed": ddt.HIndexed, "IndexedBlock": ddt.IndexedBlock,
		"HIndexedBlock": ddt.HIndexedBlock, "Struct": ddt.Struct, "Subarray": ddt.Subarray,
		"Resized": ddt.Resized, "Dup": ddt.Dup, "OfType": ddt.OfType, "Of": ddt.Of[int64],
		"ParseJITMode": ddt.ParseJITMode, "DefaultJITMode": ddt.DefaultJITMode,
	} {
		results(name, reflect.TypeOf(f))
	}
}

// TestGuardSurvivesMutation mutates everything the public API hands out
// for a committed type (constructor arguments after the call, Contents,
// Flatten's segments, the interpreter kernel's arguments) and then checks
// that Pack, Unpack, PackRange, UnpackRange, the cursors and the
// interpreter kernel still reject a buffer one byte too small with
// ErrBounds and write nothing outside it.
func TestGuardSurvivesMutation(t *testing.T) {
	blocklens := []int{2, 1, 3}
	disps := []int64{0, 40, 96}
	vec, err := ddt.Vector(4, 2, 5, ddt.Float64)
	if err != nil {
		t.Fatal(err)
	}
	ty, err := ddt.Struct(blocklens, disps, []*ddt.Type{ddt.Float64, vec, ddt.Int32})
	if err != nil {
		t.Fatal(err)
	}
	// Constructor arguments are copied: changing them later changes nothing.
	blocklens[0], disps[2] = 1<<20, -1<<40
	if err := ty.Commit(); err != nil {
		t.Fatal(err)
	}
	c := ty.Contents()
	for i := range c.Ints {
		c.Ints[i] = 0
	}
	for i := range c.Addrs {
		c.Addrs[i] = 0
	}
	for i := range c.Types {
		c.Types[i] = ddt.Byte
	}
	segs, err := ty.Flatten(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range segs {
		segs[i].Off, segs[i].Len = 0, 1
	}
	_ = ty.String()
	_ = ty.Name()

	const count = 3
	span := ty.TrueLB() + ty.TrueExtent() + (count-1)*ty.Extent()
	size := count * ty.Size()
	const guard = 256
	check := func(name string, f func(typed, packed []byte) (int, error)) {
		t.Helper()
		for _, short := range []string{"typed", "packed"} {
			tl, pl := span, size
			if short == "typed" {
				tl--
			} else {
				pl--
			}
			tbuf, pbuf := make([]byte, tl+2*guard), make([]byte, pl+2*guard)
			typed, packed := tbuf[guard:guard+tl:guard+tl], pbuf[guard:guard+pl:guard+pl]
			for i := range typed {
				typed[i] = 0x11
			}
			for i := range packed {
				packed[i] = 0x22
			}
			n, err := f(typed, packed)
			if short == "packed" && (name == "PackRange" || name == "UnpackRange" || name == "Interpreter.Pack" || name == "Interpreter.Unpack" || name == "Packer" || name == "Unpacker") {
				// Windowed entry points accept a short packed window.
				if err != nil || int64(n) != pl {
					t.Errorf("%s with short packed window: %d, %v", name, n, err)
				}
			} else if n != 0 || !errors.Is(err, ddt.ErrBounds) {
				t.Errorf("%s with %s buffer one byte short: %d, %v; want ErrBounds", name, short, n, err)
			}
			for i := range guard {
				for _, b := range [][]byte{tbuf[i : i+1], tbuf[guard+tl+int64(i):][:1], pbuf[i : i+1], pbuf[guard+pl+int64(i):][:1]} {
					if b[0] != 0 {
						t.Fatalf("%s with %s buffer short: wrote outside the buffers", name, short)
					}
				}
			}
		}
	}
	k, err := ty.Interpreter()
	if err != nil {
		t.Fatal(err)
	}
	check("Pack", func(typed, packed []byte) (int, error) { return ty.Pack(packed, typed, count) })
	check("Unpack", func(typed, packed []byte) (int, error) { return ty.Unpack(typed, packed, count) })
	check("PackRange", func(typed, packed []byte) (int, error) { return ty.PackRange(packed, typed, 0, count, 0) })
	check("UnpackRange", func(typed, packed []byte) (int, error) { return ty.UnpackRange(typed, packed, 0, count, 0) })
	check("Interpreter.Pack", func(typed, packed []byte) (int, error) { return k.Pack(packed, typed, 0, count, 0) })
	check("Interpreter.Unpack", func(typed, packed []byte) (int, error) { return k.Unpack(typed, packed, 0, count, 0) })
	cursor := func(un bool) func(typed, packed []byte) (int, error) {
		return func(typed, packed []byte) (int, error) {
			var cur *ddt.Cursor
			var err error
			if un {
				cur, err = ty.NewUnpacker(typed, 0, count)
			} else {
				cur, err = ty.NewPacker(typed, 0, count)
			}
			if err != nil {
				return 0, err
			}
			return cur.Next(packed)
		}
	}
	check("Packer", cursor(false))
	check("Unpacker", cursor(true))
}

// TestIntegerTypes pins the integer types of the exported API: counts,
// blocklengths and element-unit displacements are int, byte displacements,
// strides, bounds, extents, sizes and stream offsets int64.
func TestIntegerTypes(t *testing.T) {
	ty := reflect.TypeOf(ddt.Float64)
	method := func(name string) reflect.Type {
		m, ok := ty.MethodByName(name)
		if !ok {
			t.Fatalf("no method %s", name)
		}
		return m.Type
	}
	for name, c := range map[string]struct {
		got  reflect.Type
		want string
	}{
		"Contiguous":    {reflect.TypeOf(ddt.Contiguous), "func(int, *ddt.Type) (*ddt.Type, error)"},
		"Vector":        {reflect.TypeOf(ddt.Vector), "func(int, int, int, *ddt.Type) (*ddt.Type, error)"},
		"HVector":       {reflect.TypeOf(ddt.HVector), "func(int, int, int64, *ddt.Type) (*ddt.Type, error)"},
		"Indexed":       {reflect.TypeOf(ddt.Indexed), "func([]int, []int, *ddt.Type) (*ddt.Type, error)"},
		"HIndexed":      {reflect.TypeOf(ddt.HIndexed), "func([]int, []int64, *ddt.Type) (*ddt.Type, error)"},
		"IndexedBlock":  {reflect.TypeOf(ddt.IndexedBlock), "func(int, []int, *ddt.Type) (*ddt.Type, error)"},
		"HIndexedBlock": {reflect.TypeOf(ddt.HIndexedBlock), "func(int, []int64, *ddt.Type) (*ddt.Type, error)"},
		"Struct":        {reflect.TypeOf(ddt.Struct), "func([]int, []int64, []*ddt.Type) (*ddt.Type, error)"},
		"Subarray":      {reflect.TypeOf(ddt.Subarray), "func([]int, []int, []int, ddt.Order, *ddt.Type) (*ddt.Type, error)"},
		"Resized":       {reflect.TypeOf(ddt.Resized), "func(*ddt.Type, int64, int64) (*ddt.Type, error)"},
		"Size":          {method("Size"), "func(*ddt.Type) int64"},
		"Extent":        {method("Extent"), "func(*ddt.Type) int64"},
		"LB":            {method("LB"), "func(*ddt.Type) int64"},
		"UB":            {method("UB"), "func(*ddt.Type) int64"},
		"TrueLB":        {method("TrueLB"), "func(*ddt.Type) int64"},
		"TrueExtent":    {method("TrueExtent"), "func(*ddt.Type) int64"},
		"PackSize":      {method("PackSize"), "func(*ddt.Type, int) (int64, error)"},
		"Pack":          {method("Pack"), "func(*ddt.Type, []uint8, []uint8, int) (int, error)"},
		"Unpack":        {method("Unpack"), "func(*ddt.Type, []uint8, []uint8, int) (int, error)"},
		"PackRange":     {method("PackRange"), "func(*ddt.Type, []uint8, []uint8, int64, int, int64) (int, error)"},
		"UnpackRange":   {method("UnpackRange"), "func(*ddt.Type, []uint8, []uint8, int64, int, int64) (int, error)"},
		"NewPacker":     {method("NewPacker"), "func(*ddt.Type, []uint8, int64, int) (*ddt.Cursor, error)"},
		"NewUnpacker":   {method("NewUnpacker"), "func(*ddt.Type, []uint8, int64, int) (*ddt.Cursor, error)"},
		"Flatten":       {method("Flatten"), "func(*ddt.Type, int, int) ([]ddt.Segment, error)"},
		"Envelope":      {method("Envelope"), "func(*ddt.Type) (int, int, int, ddt.Combiner)"},
		"Segment":       {reflect.TypeOf(ddt.Segment{}), "ddt.Segment"},
	} {
		if got := c.got.String(); got != c.want {
			t.Errorf("%s: %s, want %s", name, got, c.want)
		}
	}
	seg := reflect.TypeOf(ddt.Segment{})
	for i := range seg.NumField() {
		if f := seg.Field(i); f.Type.Kind() != reflect.Int64 {
			t.Errorf("Segment.%s is %s, want int64", f.Name, f.Type)
		}
	}
	cont := reflect.TypeOf(ddt.Contents{})
	for name, want := range map[string]string{"Ints": "[]int", "Addrs": "[]int64"} {
		if f, _ := cont.FieldByName(name); f.Type.String() != want {
			t.Errorf("Contents.%s is %s, want %s", name, f.Type, want)
		}
	}
}
