package ddt

import (
	"fmt"
	"reflect"
)

// Of returns the committed datatype of the Go type T: the type map of its
// memory layout, with field offsets and padding as the Go compiler lays
// them out (the extent is unsafe.Sizeof(T), and padding bytes are not part
// of the type map). T may be a boolean, integer, float or complex kind, an
// array or a struct of those (nested freely); pointers, slices, strings,
// maps, channels, interfaces and functions are rejected with ErrInvalid.
func Of[T any]() (*Type, error) {
	return OfType(reflect.TypeFor[T]())
}

// OfType is Of for a reflect.Type.
func OfType(rt reflect.Type) (*Type, error) {
	if rt == nil {
		return nil, fmt.Errorf("ddt: OfType: nil type: %w", ErrInvalid)
	}
	t, err := ofType(rt)
	if err != nil {
		return nil, err
	}
	if err := t.Commit(); err != nil {
		return nil, err
	}
	return t, nil
}

func ofType(rt reflect.Type) (*Type, error) {
	switch rt.Kind() {
	case reflect.Bool:
		return Bool, nil
	case reflect.Int8:
		return Int8, nil
	case reflect.Uint8:
		return Uint8, nil
	case reflect.Int16:
		return Int16, nil
	case reflect.Uint16:
		return Uint16, nil
	case reflect.Int32:
		return Int32, nil
	case reflect.Uint32:
		return Uint32, nil
	case reflect.Int64:
		return Int64, nil
	case reflect.Uint64:
		return Uint64, nil
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		switch rt.Size() {
		case 8:
			if rt.Kind() == reflect.Int {
				return Int64, nil
			}
			return Uint64, nil
		case 4:
			if rt.Kind() == reflect.Int {
				return Int32, nil
			}
			return Uint32, nil
		}
	case reflect.Float32:
		return Float32, nil
	case reflect.Float64:
		return Float64, nil
	case reflect.Complex64:
		return Complex64, nil
	case reflect.Complex128:
		return Complex128, nil
	case reflect.Array:
		el, err := ofType(rt.Elem())
		if err != nil {
			return nil, fmt.Errorf("ddt: Of %v: %w", rt, err)
		}
		return Contiguous(rt.Len(), el)
	case reflect.Struct:
		n := rt.NumField()
		bl := make([]int, 0, n)
		ds := make([]int64, 0, n)
		ts := make([]*Type, 0, n)
		for i := 0; i < n; i++ {
			f := rt.Field(i)
			if f.Type.Size() == 0 {
				continue
			}
			ft, err := ofType(f.Type)
			if err != nil {
				return nil, fmt.Errorf("ddt: Of %v field %s: %w", rt, f.Name, err)
			}
			bl, ds, ts = append(bl, 1), append(ds, int64(f.Offset)), append(ts, ft)
		}
		st, err := Struct(bl, ds, ts)
		if err != nil {
			return nil, err
		}
		// Go's layout, not MPI's epsilon, decides the extent.
		return Resized(st, 0, int64(rt.Size()))
	}
	return nil, fmt.Errorf("ddt: Of %v: kind %v has no fixed memory layout: %w", rt, rt.Kind(), ErrInvalid)
}
