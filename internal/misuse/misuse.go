// Package misuse is a test helper: it calls every exported method of a
// value with arguments drawn from the values programs get wrong (negative
// and huge counts and ranks, nil and empty slices, nil pointers, zero
// structs, datatypes nil, zero, committed or not, contexts that end soon) and reports
// each method that panicked or did not return in time. The library's
// rule it checks: bad input gets an error, never a crash or a hang.
package misuse

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/weft-hpc/weft/ddt"
)

// Config tunes a Prober.
type Config struct {
	// Skip names methods not to call (Close, Free: the value's end).
	Skip []string
	// Special returns an argument of type t, or ok false to draw one as
	// usual (a package's own handles: a Region that is attached).
	Special func(r *rand.Rand, t reflect.Type) (v reflect.Value, ok bool)
	// Release is handed every result of a call (to free communicators
	// that a call made).
	Release func(v any)
	// Wait is how long a call may take before it counts as a hang
	// (every context argument ends after CtxTimeout).
	Wait, CtxTimeout time.Duration
}

// Prober calls methods with drawn arguments.
type Prober struct {
	cfg   Config
	r     *rand.Rand
	seen  map[string]bool
	calls int
	types []*ddt.Type
}

// Calls returns how many calls the Prober made.
func (p *Prober) Calls() int { return p.calls }

// New returns a Prober drawing from seed.
func New(seed uint64, cfg Config) *Prober {
	if cfg.Wait == 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.CtxTimeout == 0 {
		cfg.CtxTimeout = 100 * time.Millisecond
	}
	p := &Prober{cfg: cfg, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seen: map[string]bool{}}
	// Datatypes: none, a zero one, built-ins, a committed vector (so that
	// calls get past the type to the buffers), an uncommitted one.
	p.types = []*ddt.Type{nil, {}, ddt.Byte, ddt.Int64}
	for _, commit := range []bool{true, false} {
		if v, err := ddt.Vector(3, 1, 4, ddt.Int64); err == nil {
			if !commit || v.Commit() == nil {
				p.types = append(p.types, v)
			}
		}
	}
	return p
}

var (
	ctxType  = reflect.TypeFor[context.Context]()
	typeType = reflect.TypeFor[*ddt.Type]()
	errType  = reflect.TypeFor[error]()
)

// ints are the integers drawn for every integer parameter.
var ints = []int64{0, 1, 2, 3, 7, 8, 64, 4096, -1, -7, math.MinInt32, math.MaxInt32, 1 << 40, 1 << 62, math.MaxInt64}

// Arg draws a value of type t.
func (p *Prober) Arg(t reflect.Type) reflect.Value {
	if p.cfg.Special != nil {
		if v, ok := p.cfg.Special(p.r, t); ok {
			return v
		}
	}
	if t == typeType {
		return reflect.ValueOf(p.types[p.r.IntN(len(p.types))])
	}
	if t == ctxType {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CtxTimeout)
		time.AfterFunc(p.cfg.CtxTimeout, cancel)
		return reflect.ValueOf(ctx)
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if x := ints[p.r.IntN(len(ints))]; !v.OverflowInt(x) {
			v.SetInt(x)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if x := ints[p.r.IntN(len(ints))]; x >= 0 && !v.OverflowUint(uint64(x)) {
			v.SetUint(uint64(x))
		}
	case reflect.Float32, reflect.Float64:
		v.SetFloat([]float64{0, -1, 0.5, math.NaN(), math.Inf(1)}[p.r.IntN(5)])
	case reflect.Bool:
		v.SetBool(p.r.IntN(2) == 1)
	case reflect.String:
		v.SetString([]string{"", "x", "bogus=1"}[p.r.IntN(3)])
	case reflect.Slice:
		switch p.r.IntN(4) {
		case 0: // nil
		case 1:
			v = reflect.MakeSlice(t, 0, 0)
		default:
			n := []int{1, 3, 8, 100, 4096}[p.r.IntN(5)]
			v = reflect.MakeSlice(t, n, n)
			if t.Elem().Kind() != reflect.Uint8 {
				for i := range min(n, 8) {
					v.Index(i).Set(p.Arg(t.Elem()))
				}
			}
		}
	case reflect.Pointer:
		if p.r.IntN(2) == 1 {
			v = reflect.New(t.Elem()) // a zero value, not one the package made
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if v.Field(i).CanSet() {
				v.Field(i).Set(p.Arg(t.Field(i).Type))
			}
		}
	}
	return v
}

// Methods calls every exported method of recv once with drawn arguments
// and returns a line for each call that panicked or hung, a method
// reported once per Prober for each of the two.
func (p *Prober) Methods(recv any) []string { return p.MethodsExcept(recv) }

// MethodsExcept is Methods skipping the named methods too.
func (p *Prober) MethodsExcept(recv any, skip ...string) []string {
	rv := reflect.ValueOf(recv)
	rt := rv.Type()
	var bad []string
	for i := range rt.NumMethod() {
		name := rt.Method(i).Name
		if slices.Contains(p.cfg.Skip, name) || slices.Contains(skip, name) {
			continue
		}
		if s, ok := p.probe(rt.String()+"."+name, rv.Method(i)); ok {
			bad = append(bad, s)
		}
	}
	return bad
}

// Funcs calls each function of fns (by name; generic functions
// instantiated) once with drawn arguments and reports as Methods does.
func (p *Prober) Funcs(fns map[string]any) []string {
	names := make([]string, 0, len(fns))
	for name := range fns {
		names = append(names, name)
	}
	slices.Sort(names) // draws in a fixed order
	var bad []string
	for _, name := range names {
		if s, ok := p.probe(name, reflect.ValueOf(fns[name])); ok {
			bad = append(bad, s)
		}
	}
	return bad
}

// probe calls f, named name, with drawn arguments; it returns the report
// of a panic or a hang not reported for name before.
func (p *Prober) probe(name string, f reflect.Value) (string, bool) {
	args := make([]reflect.Value, f.Type().NumIn())
	for j := range args {
		args[j] = p.Arg(f.Type().In(j))
	}
	p.calls++
	res := p.call(f, args)
	key := name + " " + strings.SplitN(res, ":", 2)[0] // panic or hang
	if res == "" || p.seen[key] {
		return "", false
	}
	p.seen[key] = true
	return fmt.Sprintf("%s(%s): %s", name, describe(args), res), true
}

func (p *Prober) call(m reflect.Value, args []reflect.Value) string {
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		var out []reflect.Value
		if m.Type().IsVariadic() {
			out = m.CallSlice(args)
		} else {
			out = m.Call(args)
		}
		if p.cfg.Release != nil {
			for _, o := range out {
				if o.Type() != errType && o.CanInterface() {
					p.cfg.Release(o.Interface())
				}
			}
		}
		done <- ""
	}()
	select {
	case s := <-done:
		return s
	case <-time.After(p.cfg.Wait):
		return fmt.Sprintf("no return within %v", p.cfg.Wait)
	}
}

// describe names the arguments of a call shallowly: what a pointer,
// slice or context holds is not read, since a call that did not return,
// or a context's timer, may still be writing it.
func describe(args []reflect.Value) string {
	var as []string
	for _, a := range args {
		var s string
		switch a.Kind() {
		case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Chan, reflect.Func, reflect.Slice, reflect.UnsafePointer:
			switch {
			case a.IsNil():
				s = "nil " + a.Type().String()
			case a.Kind() == reflect.Slice:
				s = fmt.Sprintf("%s of %d", a.Type(), a.Len())
			default:
				s = a.Type().String()
			}
		case reflect.Struct, reflect.Array:
			s = a.Type().String() + "{…}"
		default:
			s = fmt.Sprint(a.Interface())
		}
		as = append(as, s)
	}
	return strings.Join(as, ", ")
}
