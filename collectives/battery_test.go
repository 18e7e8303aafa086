package collectives_test

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/testenv"
)

// The battery: every collective, with each of its algorithms, every root
// class, in place and not, over several counts and element types, checked
// on every rank against a serial reference computed from the generators
// (every rank can compute every other rank's contribution).

// env is one rank's view of a battery run.
type env struct {
	ctx  context.Context
	c    *C.Coll
	p, r int
	salt int
	what string // the call being checked, for errors
	nb   bool   // call the nonblocking forms (nb_test.go)
}

func newEnv(ctx context.Context, c *C.Coll) *env {
	return &env{ctx: ctx, c: c, p: c.Size(), r: c.Rank()}
}

func (e *env) next(what string, args ...any) int {
	e.salt++
	e.what = fmt.Sprintf(what, args...)
	return e.salt
}

func (e *env) errf(format string, args ...any) error {
	return fmt.Errorf("rank %d of %d, %s: %s", e.r, e.p, e.what, fmt.Sprintf(format, args...))
}

func (e *env) call(err error) error {
	if err != nil {
		return fmt.Errorf("rank %d of %d, %s: %w", e.r, e.p, e.what, err)
	}
	return nil
}

// roots are the roots tried: first, last and middle rank.
func (e *env) roots() []int {
	rs := []int{0}
	if e.p > 1 {
		rs = append(rs, e.p-1)
	}
	if m := e.p / 2; m != 0 && m != e.p-1 {
		rs = append(rs, m)
	}
	return rs
}

// noise is a table of pseudo-random words; mix picks from it by rank,
// index and call, cheaply enough for the 1 MiB cases.
var noise = func() []uint64 {
	t := make([]uint64, 4099) // prime: the rank and call offsets below stay distinct
	x := uint64(0x9E3779B97F4A7C15)
	for i := range t {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		t[i] = x
	}
	return t
}()

func mix(r, i, salt int) uint64 {
	return noise[(uint(i)+uint(r)*613+uint(salt)*1409)%uint(len(noise))] ^ uint64(r)<<40
}

// gen makes element i of rank r's data for call salt.
type gen[T any] func(r, i, salt int) T

// Small integral values: sums and products of up to 8 are exact in every
// type, so any order of combination gives the same result.
func genInt[T C.Integer](r, i, salt int) T { return T(mix(r, i, salt)%7) - 3 }
func genUint8(r, i, salt int) uint8        { return uint8(mix(r, i, salt)) }
func genFloat(r, i, salt int) float64      { return float64(mix(r, i, salt)%7) - 3 }
func genComplex(r, i, salt int) complex128 {
	x := mix(r, i, salt)
	return complex(float64(x%5)-2, float64(x/5%3)-1)
}
func genLoc(r, i, salt int) C.Loc[float64] {
	return C.Loc[float64]{Val: float64(mix(r, i, salt) % 3), Idx: r}
}
func genAff(r, i, salt int) aff { x := mix(r, i, salt); return aff{int64(x%5) - 2, int64(x/5%9) - 4} }
func genWide(r, i, salt int) float64 {
	x := mix(r, i, salt)
	return math.Ldexp(float64(x>>11)/(1<<53)-0.5, int(x%40)-20)
}
func fillGen[T any](s []T, g gen[T], r, salt int) {
	for i := range s {
		s[i] = g(r, i, salt)
	}
}

// aff is x ↦ A·x + B; combining is composition (apply the left operand
// first), associative and not commutative.
type aff struct{ A, B int64 }

var compose = C.NewOp("compose", func(inout, in []aff) {
	for i := range inout {
		inout[i] = aff{inout[i].A * in[i].A, in[i].A*inout[i].B + in[i].B}
	}
}, false)

func junk[T any](s []T) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
	for i := range b {
		b[i] = 0xA5
	}
}

func same[T comparable](got, want []T) int {
	if len(got) != len(want) {
		return -2
	}
	for i := range got {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

func (e *env) expect(got, want any, bad int) error {
	if bad == -1 {
		return nil
	}
	if bad == -2 {
		return e.errf("length differs")
	}
	return e.errf("element %d: got %v, want %v", bad, index(got, bad), index(want, bad))
}

func index(s any, i int) any {
	switch v := s.(type) {
	case []int32:
		return v[i]
	case []uint8:
		return v[i]
	case []float64:
		return v[i]
	case []complex128:
		return v[i]
	case []aff:
		return v[i]
	case []C.Loc[float64]:
		return v[i]
	}
	return "?"
}

func check[T comparable](e *env, got, want []T) error { return e.expect(got, want, same(got, want)) }

// checkBcast runs one Bcast of n elements from root for call salt and
// checks the result.
func checkBcast[T comparable](e *env, g gen[T], n, root, salt int) error {
	buf, want := make([]T, n), make([]T, n)
	fillGen(want, g, root, salt)
	if e.r == root {
		copy(buf, want)
	} else {
		junk(buf)
	}
	if err := e.call(doBcast(e, e.c, buf, root)); err != nil {
		return err
	}
	return check(e, buf, want)
}

// checkGatherScatter checks Gather and Scatter of n elements per rank to
// and from root (in place at the root or not) against the serial
// reference; what names the case in errors.
func checkGatherScatter[T comparable](e *env, g gen[T], n, root int, inPlace bool, what string) error {
	c, p, r := e.c, e.p, e.r
	salt := e.next("Gather%s", what)
	send := make([]T, n)
	fillGen(send, g, r, salt)
	want := make([]T, p*n)
	for q := 0; q < p; q++ {
		fillGen(want[q*n:(q+1)*n], g, q, salt)
	}
	var recv []T
	if r == root {
		recv = make([]T, p*n)
		junk(recv)
		if inPlace {
			copy(recv[r*n:], send)
			send = nil
		}
	}
	if err := e.call(doGather(e, c, send, recv, root)); err != nil {
		return err
	}
	if r == root {
		if err := check(e, recv, want); err != nil {
			return err
		}
	}
	salt = e.next("Scatter%s", what)
	var all []T
	if r == root {
		all = make([]T, p*n)
		for q := 0; q < p; q++ {
			fillGen(all[q*n:(q+1)*n], g, q, salt)
		}
	}
	mine, wantMine := make([]T, n), make([]T, n)
	fillGen(wantMine, g, r, salt)
	junk(mine)
	if inPlace && r == root {
		mine = nil
	}
	if err := e.call(doScatter(e, c, all, mine, root)); err != nil {
		return err
	}
	if mine == nil {
		mine = all[r*n : (r+1)*n]
	}
	return check(e, mine, wantMine)
}

// movers checks the data-movement collectives for element type T.
func movers[T comparable](e *env, tname string, g gen[T], counts []int) error {
	c, p, r := e.c, e.p, e.r
	for _, n := range counts {
		for _, alg := range []C.Algorithm{C.Binomial, C.ScatterAllgather, C.Linear, C.Pipeline} {
			if err := c.SetAlgorithm(C.CollBcast, alg); err != nil {
				return err
			}
			for _, root := range e.roots() {
				if err := checkBcast(e, g, n, root, e.next("Bcast[%s] n=%d %s root=%d", tname, n, alg, root)); err != nil {
					return err
				}
			}
		}
		for _, alg := range []C.Algorithm{C.Binomial, C.Linear} {
			_ = c.SetAlgorithm(C.CollGather, alg)
			_ = c.SetAlgorithm(C.CollScatter, alg)
			for _, root := range e.roots() {
				for _, inPlace := range []bool{false, true} {
					if err := checkGatherScatter(e, g, n, root, inPlace, fmt.Sprintf("[%s] n=%d %s root=%d inplace=%v", tname, n, alg, root, inPlace)); err != nil {
						return err
					}
				}
			}
		}
		for _, alg := range []C.Algorithm{C.Bruck, C.Ring, C.RecursiveDoubling} {
			_ = c.SetAlgorithm(C.CollAllgather, alg)
			for _, inPlace := range []bool{false, true} {
				salt := e.next("Allgather[%s] n=%d %s inplace=%v", tname, n, alg, inPlace)
				send := make([]T, n)
				fillGen(send, g, r, salt)
				recv, want := make([]T, p*n), make([]T, p*n)
				for q := 0; q < p; q++ {
					fillGen(want[q*n:(q+1)*n], g, q, salt)
				}
				junk(recv)
				if inPlace {
					copy(recv[r*n:], send)
					send = nil
				}
				if err := e.call(doAllgather(e, c, send, recv)); err != nil {
					return err
				}
				if err := check(e, recv, want); err != nil {
					return err
				}
			}
		}
		for _, alg := range []C.Algorithm{C.Linear, C.Pairwise, C.Bruck} {
			_ = c.SetAlgorithm(C.CollAlltoall, alg)
			for _, inPlace := range []bool{false, true} {
				// block j of rank q is gen(q, j·n+i)
				salt := e.next("Alltoall[%s] n=%d %s inplace=%v", tname, n, alg, inPlace)
				send := make([]T, p*n)
				fillGen(send, g, r, salt)
				recv, want := make([]T, p*n), make([]T, p*n)
				for q := 0; q < p; q++ {
					for i := 0; i < n; i++ {
						want[q*n+i] = g(q, r*n+i, salt)
					}
				}
				junk(recv)
				if inPlace {
					copy(recv, send)
					send = nil
				}
				if err := e.call(doAlltoall(e, c, send, recv)); err != nil {
					return err
				}
				if err := check(e, recv, want); err != nil {
					return err
				}
			}
		}
		if err := vmovers(e, tname, g, n); err != nil {
			return err
		}
	}
	for _, k := range []C.Collective{C.CollBcast, C.CollGather, C.CollScatter, C.CollAllgather, C.CollAlltoall, C.CollAllgatherv} {
		_ = c.SetAlgorithm(k, C.Auto)
	}
	return nil
}

// vcount is rank q's count in the v-collectives for base count n: they
// differ between ranks, some are zero.
func vcount(n, q, j int) int { return (n + 3*q + j) % (n + 3) }

// vlayout returns counts and displacements (with gaps) for counts cnt.
func vlayout(cnt func(q int) int, p int) (counts, displs []int, size int) {
	counts, displs = make([]int, p), make([]int, p)
	for q := 0; q < p; q++ {
		counts[q] = cnt(q)
		displs[q] = size + 1
		size += counts[q] + 1
	}
	return counts, displs, size
}

func vmovers[T comparable](e *env, tname string, g gen[T], n int) error {
	c, p, r := e.c, e.p, e.r
	counts, displs, size := vlayout(func(q int) int { return vcount(n, q, 0) }, p)
	for _, root := range e.roots() {
		for _, inPlace := range []bool{false, true} {
			salt := e.next("Gatherv[%s] n=%d root=%d inplace=%v", tname, n, root, inPlace)
			send := make([]T, counts[r])
			fillGen(send, g, r, salt)
			var recv []T
			if r == root {
				recv = make([]T, size)
				junk(recv)
				if inPlace {
					copy(recv[displs[r]:], send)
					send = nil
				}
			}
			if err := e.call(doGatherv(e, c, send, recv, counts, displs, root)); err != nil {
				return err
			}
			if r == root {
				for q := 0; q < p; q++ {
					want := make([]T, counts[q])
					fillGen(want, g, q, salt)
					if err := check(e, recv[displs[q]:displs[q]+counts[q]], want); err != nil {
						return err
					}
				}
			}
			salt = e.next("Scatterv[%s] n=%d root=%d inplace=%v", tname, n, root, inPlace)
			var all []T
			if r == root {
				all = make([]T, size)
				for q := 0; q < p; q++ {
					fillGen(all[displs[q]:displs[q]+counts[q]], g, q, salt)
				}
			}
			mine, want := make([]T, counts[r]), make([]T, counts[r])
			fillGen(want, g, r, salt)
			junk(mine)
			if inPlace && r == root {
				mine = nil
			}
			if err := e.call(doScatterv(e, c, all, counts, displs, mine, root)); err != nil {
				return err
			}
			if mine == nil {
				mine = all[displs[r] : displs[r]+counts[r]]
			}
			if err := check(e, mine, want); err != nil {
				return err
			}
		}
	}
	defer c.SetAlgorithm(C.CollAllgatherv, C.Auto)
	defer c.SetAlgorithm(C.CollAlltoall, C.Auto)
	for _, alg := range []C.Algorithm{C.Auto, C.Linear, C.Ring} { // Auto: hierarchical where a process holds several ranks
		_ = c.SetAlgorithm(C.CollAllgatherv, alg)
		for _, inPlace := range []bool{false, true} {
			salt := e.next("Allgatherv[%s] n=%d %s inplace=%v", tname, n, alg, inPlace)
			send := make([]T, counts[r])
			fillGen(send, g, r, salt)
			recv := make([]T, size)
			junk(recv)
			if inPlace {
				copy(recv[displs[r]:], send)
				send = nil
			}
			if err := e.call(doAllgatherv(e, c, send, recv, counts, displs)); err != nil {
				return err
			}
			for q := 0; q < p; q++ {
				want := make([]T, counts[q])
				fillGen(want, g, q, salt)
				if err := check(e, recv[displs[q]:displs[q]+counts[q]], want); err != nil {
					return err
				}
			}
		}
	}
	// Alltoallv: rank q sends vcount(n, q, j) elements to j, element i
	// being gen(q, j·1000+i).
	sc, sd, ssize := vlayout(func(j int) int { return vcount(n, r, j) }, p)
	rc, rd, rsize := vlayout(func(q int) int { return vcount(n, q, r) }, p)
	for _, alg := range []C.Algorithm{C.Linear, C.Pairwise, C.Bruck} {
		_ = c.SetAlgorithm(C.CollAlltoall, alg)
		salt := e.next("Alltoallv[%s] n=%d %s", tname, n, alg)
		send := make([]T, ssize)
		for j := 0; j < p; j++ {
			for i := 0; i < sc[j]; i++ {
				send[sd[j]+i] = g(r, j*1000+i, salt)
			}
		}
		recv := make([]T, rsize)
		junk(recv)
		if err := e.call(doAlltoallv(e, c, send, sc, sd, recv, rc, rd)); err != nil {
			return err
		}
		for q := 0; q < p; q++ {
			want := make([]T, rc[q])
			for i := range want {
				want[i] = g(q, r*1000+i, salt)
			}
			if err := check(e, recv[rd[q]:rd[q]+rc[q]], want); err != nil {
				return err
			}
		}
	}
	if p > 1 || n > 0 {
		// in place: every rank sends as much as it receives from each
		salt := e.next("Alltoallv[%s] n=%d in place", tname, n)
		cnt := func(q, j int) int { return (n + q + j) % (n + 2) }
		rc, rd, rsize := vlayout(func(q int) int { return cnt(q, r) }, p)
		recv := make([]T, rsize)
		for j := 0; j < p; j++ {
			for i := 0; i < rc[j]; i++ {
				recv[rd[j]+i] = g(r, j*1000+i, salt)
			}
		}
		if err := e.call(doAlltoallv(e, c, nil, nil, nil, recv, rc, rd)); err != nil {
			return err
		}
		for q := 0; q < p; q++ {
			want := make([]T, rc[q])
			for i := range want {
				want[i] = g(q, r*1000+i, salt)
			}
			if err := check(e, recv[rd[q]:rd[q]+rc[q]], want); err != nil {
				return err
			}
		}
	}
	return nil
}

// contributions returns every rank's vector of n for call salt.
func contributions[T any](g gen[T], p, n, salt int) [][]T {
	xs := make([][]T, p)
	for q := range xs {
		xs[q] = make([]T, n)
		fillGen(xs[q], g, q, salt)
	}
	return xs
}

// foldRanks combines xs[lo..hi) in rank order (the serial reference).
func foldRanks[T any](op C.Op[T], xs [][]T, lo, hi int) []T {
	out := append([]T(nil), xs[lo]...)
	for q := lo + 1; q < hi; q++ {
		if err := op.Apply(out, xs[q]); err != nil {
			panic(err)
		}
	}
	return out
}

// resultCmp compares a reduction's result with the serial fold: by ==,
// or bit for bit (deterministic mode).
func resultCmp[T comparable](e *env, bitwise bool) func(got, want []T) error {
	return func(got, want []T) error {
		if !bitwise {
			return check(e, got, want)
		}
		gb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(got))), len(got)*int(unsafe.Sizeof(*new(T))))
		wb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(want))), len(want)*int(unsafe.Sizeof(*new(T))))
		if string(gb) != string(wb) {
			return e.errf("not bitwise the serial fold (first differing element %d)", same(got, want))
		}
		return nil
	}
}

// checkReduce runs one Reduce of n elements of g's contributions for call
// salt to root (in place or not) and checks the send buffer and, at the
// root, the result with cmp against the serial fold.
func checkReduce[T comparable](e *env, g gen[T], op C.Op[T], n, root int, inPlace bool, salt int, cmp func(got, want []T) error) error {
	p, r := e.p, e.r
	xs := contributions(g, p, n, salt)
	send := append([]T(nil), xs[r]...)
	var recv []T
	if r == root {
		recv = make([]T, n)
		junk(recv)
		if inPlace {
			copy(recv, send)
			send = nil
		}
	}
	if err := e.call(doReduce(e, e.c, send, recv, op, root)); err != nil {
		return err
	}
	if send != nil {
		if err := check(e, send, xs[r]); err != nil {
			return fmt.Errorf("send buffer changed: %w", err)
		}
	}
	if r == root {
		return cmp(recv, foldRanks(op, xs, 0, p))
	}
	return nil
}

// checkAllreduce is checkReduce for Allreduce.
func checkAllreduce[T comparable](e *env, g gen[T], op C.Op[T], n int, inPlace bool, salt int, cmp func(got, want []T) error) error {
	xs := contributions(g, e.p, n, salt)
	send := append([]T(nil), xs[e.r]...)
	recv := make([]T, n)
	junk(recv)
	if inPlace {
		copy(recv, send)
		send = nil
	}
	if err := e.call(doAllreduce(e, e.c, send, recv, op)); err != nil {
		return err
	}
	return cmp(recv, foldRanks(op, xs, 0, e.p))
}

// reductions checks Reduce, Allreduce, ReduceScatterBlock, Scan and
// Exscan with op on element type T. With bitwise set the results must
// equal the serial fold bit for bit (deterministic mode) rather than by ==.
func reductions[T comparable](e *env, tname string, g gen[T], op C.Op[T], counts []int, bitwise bool) error {
	c, p, r := e.c, e.p, e.r
	cmp := resultCmp[T](e, bitwise)
	for _, n := range counts {
		for _, alg := range []C.Algorithm{C.Binomial, C.ReduceScatterGather, C.Linear} {
			_ = c.SetAlgorithm(C.CollReduce, alg)
			for _, root := range e.roots() {
				for _, inPlace := range []bool{false, true} {
					salt := e.next("Reduce[%s,%s] n=%d %s root=%d inplace=%v", tname, op, n, alg, root, inPlace)
					if err := checkReduce(e, g, op, n, root, inPlace, salt, cmp); err != nil {
						return err
					}
				}
			}
		}
		for _, alg := range []C.Algorithm{C.RecursiveDoubling, C.Rabenseifner, C.Ring} {
			_ = c.SetAlgorithm(C.CollAllreduce, alg)
			for _, inPlace := range []bool{false, true} {
				salt := e.next("Allreduce[%s,%s] n=%d %s inplace=%v", tname, op, n, alg, inPlace)
				if err := checkAllreduce(e, g, op, n, inPlace, salt, cmp); err != nil {
					return err
				}
			}
		}
		nb := n // ReduceScatterBlock's block; the whole input is p·nb
		if n > 4096 {
			nb = n / p
		}
		for _, alg := range []C.Algorithm{C.Ring, C.Pairwise} {
			_ = c.SetAlgorithm(C.CollReduceScatter, alg)
			for _, inPlace := range []bool{false, true} {
				n := nb
				salt := e.next("ReduceScatterBlock[%s,%s] n=%d %s inplace=%v", tname, op, n, alg, inPlace)
				xs := contributions(g, p, p*n, salt)
				full := foldRanks(op, xs, 0, p)
				send := append([]T(nil), xs[r]...)
				recv := make([]T, n)
				junk(recv)
				if inPlace {
					recv, send = send, nil
				}
				if err := e.call(doReduceScatterBlock(e, c, send, recv, op)); err != nil {
					return err
				}
				if err := cmp(recv[:n], full[r*n:(r+1)*n]); err != nil {
					return err
				}
			}
		}
		for _, alg := range []C.Algorithm{C.Ring, C.Pairwise} {
			_ = c.SetAlgorithm(C.CollReduceScatter, alg)
			for _, inPlace := range []bool{false, true} {
				counts, _, _ := vlayout(func(q int) int { return vcount(nb, q, 0) }, p)
				offs := make([]int, p+1)
				for q := 0; q < p; q++ {
					offs[q+1] = offs[q] + counts[q]
				}
				salt := e.next("ReduceScatter[%s,%s] counts=%v %s inplace=%v", tname, op, counts, alg, inPlace)
				xs := contributions(g, p, offs[p], salt)
				full := foldRanks(op, xs, 0, p)
				send := append([]T(nil), xs[r]...)
				recv := make([]T, counts[r])
				junk(recv)
				if inPlace {
					recv, send = send, nil
				}
				if err := e.call(doReduceScatter(e, c, send, recv, counts, op)); err != nil {
					return err
				}
				if err := cmp(recv[:counts[r]], full[offs[r]:offs[r+1]]); err != nil {
					return err
				}
			}
		}
		for _, alg := range []C.Algorithm{C.RecursiveDoubling, C.Linear} {
			_ = c.SetAlgorithm(C.CollScan, alg)
			for _, inPlace := range []bool{false, true} {
				for _, excl := range []bool{false, true} {
					name := "Scan"
					if excl {
						name = "Exscan"
					}
					salt := e.next("%s[%s,%s] n=%d %s inplace=%v", name, tname, op, n, alg, inPlace)
					xs := contributions(g, p, n, salt)
					send := append([]T(nil), xs[r]...)
					recv := make([]T, n)
					junk(recv)
					before := append([]T(nil), recv...)
					if inPlace {
						copy(recv, send)
						before = append(before[:0], send...)
						send = nil
					}
					if err := e.call(doScan(e, c, excl, send, recv, op)); err != nil {
						return err
					}
					var want []T
					switch {
					case !excl:
						want = foldRanks(op, xs, 0, r+1)
					case r == 0:
						want = before // left as it was
					default:
						want = foldRanks(op, xs, 0, r)
					}
					if excl && r == 0 {
						if err := check(e, recv, want); err != nil {
							return err
						}
					} else if err := cmp(recv, want); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, k := range []C.Collective{C.CollReduce, C.CollAllreduce, C.CollReduceScatter, C.CollScan} {
		_ = c.SetAlgorithm(k, C.Auto)
	}
	return nil
}

// battery runs everything on one rank. big is the count of the ~1 MiB
// cases (0: none).
func battery(ctx context.Context, c *C.Coll, big bool) error {
	return batteryOn(newEnv(ctx, c), big)
}

// batteryOn is battery with e's mode.
func batteryOn(e *env, big bool) error {
	ctx, c := e.ctx, e.c
	counts := []int{0, 1, 37}
	if err := C.Barrier(ctx, c); err != nil {
		return err
	}
	if err := movers(e, "int32", genInt[int32], counts); err != nil {
		return err
	}
	if err := movers(e, "float64", genFloat, counts); err != nil {
		return err
	}
	if err := movers(e, "complex128", genComplex, counts); err != nil {
		return err
	}
	if err := movers(e, "uint8", genUint8, counts); err != nil {
		return err
	}
	for _, op := range []C.Op[int32]{C.Sum[int32](), C.Prod[int32](), C.Min[int32](), C.Max[int32](), C.BXor[int32](), C.LAnd[int32](), C.LOr[int32]()} {
		if err := reductions(e, "int32", genInt[int32], op, counts, false); err != nil {
			return err
		}
	}
	for _, op := range []C.Op[uint8]{C.Sum[uint8](), C.BAnd[uint8](), C.BOr[uint8](), C.LXor[uint8](), C.Max[uint8]()} {
		if err := reductions(e, "uint8", genUint8, op, counts, false); err != nil {
			return err
		}
	}
	for _, op := range []C.Op[float64]{C.Sum[float64](), C.Prod[float64](), C.Min[float64]()} {
		if err := reductions(e, "float64", genFloat, op, counts, false); err != nil {
			return err
		}
	}
	for _, op := range []C.Op[complex128]{C.Sum[complex128](), C.Prod[complex128]()} {
		if err := reductions(e, "complex128", genComplex, op, counts, false); err != nil {
			return err
		}
	}
	if err := reductions(e, "loc", genLoc, C.MinLoc[float64](), counts, false); err != nil {
		return err
	}
	if err := reductions(e, "loc", genLoc, C.MaxLoc[float64](), counts, false); err != nil {
		return err
	}
	if err := reductions(e, "aff", genAff, compose, counts, false); err != nil {
		return err
	}
	if err := wmovers(e, 3, 4, 5); err != nil {
		return err
	}
	if big {
		if err := bigOn(&env{ctx: ctx, c: c, p: e.p, r: e.r, nb: e.nb}); err != nil {
			return err
		}
	}
	return C.Barrier(ctx, c) // see detBattery
}

// bigBattery runs the ~1 MiB cases: Bcast and the reductions (float64
// sums) of 1 MiB messages, the other data movers with results of ~1 MiB
// (blocks of 1 MiB / p per rank) of uint8.
func bigBattery(ctx context.Context, c *C.Coll) error {
	return bigOn(newEnv(ctx, c))
}

// bigOn is bigBattery with e's mode. Under the race detector, whose
// shadow memory costs time in proportion to the bytes copied, the sizes
// are halved: 512 KiB still takes every large-message algorithm and the
// pipelined Bcast's several segments.
func bigOn(e *env) error {
	ctx, c := e.ctx, e.c
	mib := 1 << 20
	if testenv.Race {
		mib /= 2
	}
	n := mib + 3
	for _, alg := range []C.Algorithm{C.Binomial, C.ScatterAllgather, C.Linear, C.Pipeline} {
		_ = c.SetAlgorithm(C.CollBcast, alg)
		for _, root := range e.roots() {
			salt := e.next("Bcast[uint8] n=%d %s root=%d", n, alg, root)
			buf, want := make([]uint8, n), make([]uint8, n)
			fillGen(want, genUint8, root, salt)
			if e.r == root {
				copy(buf, want)
			}
			if err := e.call(doBcast(e, c, buf, root)); err != nil {
				return err
			}
			if err := check(e, buf, want); err != nil {
				return err
			}
		}
	}
	_ = c.SetAlgorithm(C.CollBcast, C.Auto)
	if err := movers(e, "uint8", genUint8, []int{mib/e.p + 1}); err != nil {
		return err
	}
	if err := reductions(e, "float64", genFloat, C.Sum[float64](), []int{mib/8 + 1}, false); err != nil {
		return err
	}
	return C.Barrier(ctx, c)
}

// detBattery runs the reductions in deterministic mode on values of
// widely spread magnitudes, requiring every algorithm's result to be the
// serial fold bit for bit.
func detBattery(ctx context.Context, c *C.Coll, counts []int) error {
	if !c.Deterministic() {
		return fmt.Errorf("handle not in deterministic mode")
	}
	e := newEnv(ctx, c)
	if err := reductions(e, "float64", genWide, C.Sum[float64](), counts, true); err != nil {
		return err
	}
	if err := reductions(e, "aff", genAff, compose, counts, true); err != nil {
		return err
	}
	// A process that returns from its last collective may still owe a
	// peer the data of a send (read from it after the send completed): a
	// barrier before World.Close.
	return C.Barrier(ctx, c)
}
