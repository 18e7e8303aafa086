package main

// The recipe: the cases of one run written for the ranks of every
// contender. The MPI program builds each case's MPI datatype from it, call
// for call the constructors that built the weft type (read back with
// ddt.Type.Contents, as MPI_Type_get_contents reads an MPI type), so both
// sides describe the same layout by construction; the weft ranks read only
// the case lines and build the cases from package ddtcases.
//
// Format: whitespace-separated tokens, one item per line.
//
//	ddtpp 1
//	case NAME SIZE COUNT TYPED BYTES TYPESIZE EXTENT ITERS WARMUP NTYPES
//	type ID KIND ARGS...        (NTYPES lines, ID 0 … NTYPES-1; the last is the case's type)
//
// COUNT elements of the type are sent from a TYPED-byte buffer (element
// 0's displacement 0 at byte 0); BYTES is the packed size; TYPESIZE and
// EXTENT are the type's size and extent, which the MPI type must match.
// ITERS timed and WARMUP untimed round trips. A type refers to earlier IDs
// of its case only. KIND and ARGS (integers; OLD and T are IDs):
//
//	named NAME                   NAME one of byte bool int8 … complex128
//	contiguous COUNT OLD
//	vector COUNT BLOCKLEN STRIDE OLD
//	hvector COUNT BLOCKLEN STRIDE OLD
//	indexed N BLOCKLEN×N DISP×N OLD
//	hindexed N BLOCKLEN×N DISP×N OLD
//	indexed_block N BLOCKLEN DISP×N OLD
//	hindexed_block N BLOCKLEN DISP×N OLD
//	struct N BLOCKLEN×N DISP×N T×N
//	subarray NDIMS SIZE×NDIMS SUBSIZE×NDIMS START×NDIMS ORDER OLD   (ORDER c or fortran)
//	resized LB EXTENT OLD
//	dup OLD

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
)

// recipeVersion is the format's version, the first line's second token.
const recipeVersion = 1

// errRecipe marks a malformed recipe.
var errRecipe = errors.New("bad recipe")

// namedTypes are the predefined types a recipe can name.
var namedTypes = map[string]*ddt.Type{
	"byte": ddt.Byte, "bool": ddt.Bool,
	"int8": ddt.Int8, "int16": ddt.Int16, "int32": ddt.Int32, "int64": ddt.Int64,
	"uint8": ddt.Uint8, "uint16": ddt.Uint16, "uint32": ddt.Uint32, "uint64": ddt.Uint64,
	"float32": ddt.Float32, "float64": ddt.Float64, "complex64": ddt.Complex64, "complex128": ddt.Complex128,
}

// recipeCase is one case line.
type recipeCase struct {
	name, size            string
	count, typed          int
	bytes, tsize, extent  int64
	iters, warmup, ntypes int
}

func (rc recipeCase) String() string { return rc.name + "/" + rc.size }

// writeRecipe writes the recipe of cases, each with its iteration counts.
func writeRecipe(w io.Writer, cases []*ddtcases.Case, iters func(*ddtcases.Case) (n, warmup int)) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "ddtpp %d\n", recipeVersion)
	for _, c := range cases {
		lines, err := typeLines(c.Type)
		if err != nil {
			return fmt.Errorf("%v: %w", c, err)
		}
		n, wu := iters(c)
		fmt.Fprintf(bw, "case %s %s %d %d %d %d %d %d %d %d\n", c.Name, c.Size, c.Count, c.Typed, c.Bytes,
			c.Type.Size(), c.Type.Extent(), n, wu, len(lines))
		for i, l := range lines {
			fmt.Fprintf(bw, "type %d %s\n", i, l)
		}
	}
	return bw.Flush()
}

// typeLines describes t as the constructor calls that built it, components
// first (a component used several times is described once); the last line
// is t.
func typeLines(t *ddt.Type) ([]string, error) {
	ids := map[*ddt.Type]int{}
	var lines []string
	var walk func(t *ddt.Type) (int, error)
	walk = func(t *ddt.Type) (int, error) {
		if id, ok := ids[t]; ok {
			return id, nil
		}
		c := t.Contents()
		refs := make([]string, len(c.Types))
		for i, sub := range c.Types {
			id, err := walk(sub)
			if err != nil {
				return 0, err
			}
			refs[i] = strconv.Itoa(id)
		}
		var f []string
		ints := func(v []int) {
			for _, x := range v {
				f = append(f, strconv.Itoa(x))
			}
		}
		addrs := func(v []int64) {
			for _, x := range v {
				f = append(f, strconv.FormatInt(x, 10))
			}
		}
		switch c.Combiner {
		case ddt.CombinerNamed:
			if namedTypes[t.Name()] != t {
				return 0, fmt.Errorf("predefined type %s has no recipe name", t.Name())
			}
			f = []string{"named", t.Name()}
		case ddt.CombinerContiguous, ddt.CombinerVector, ddt.CombinerIndexed, ddt.CombinerIndexedBlock:
			f = []string{kindName[c.Combiner]}
			ints(c.Ints)
		case ddt.CombinerHVector, ddt.CombinerHIndexed, ddt.CombinerHIndexedBlock, ddt.CombinerStruct:
			f = []string{kindName[c.Combiner]}
			ints(c.Ints)
			addrs(c.Addrs)
		case ddt.CombinerSubarray:
			n := c.Ints[0]
			f = []string{"subarray"}
			ints(c.Ints[:1+3*n])
			order := "c"
			if ddt.Order(c.Ints[1+3*n]) == ddt.OrderFortran {
				order = "fortran"
			}
			f = append(f, order)
		case ddt.CombinerResized:
			f = []string{"resized"}
			addrs(c.Addrs)
		case ddt.CombinerDup:
			f = []string{"dup"}
		default:
			return 0, fmt.Errorf("combiner %v has no recipe form", c.Combiner)
		}
		f = append(f, refs...)
		ids[t] = len(lines)
		lines = append(lines, strings.Join(f, " "))
		return ids[t], nil
	}
	if _, err := walk(t); err != nil {
		return nil, err
	}
	return lines, nil
}

// kindName is the recipe's name of the constructors written with their
// MPI arguments unchanged.
var kindName = map[ddt.Combiner]string{
	ddt.CombinerContiguous: "contiguous", ddt.CombinerVector: "vector", ddt.CombinerIndexed: "indexed",
	ddt.CombinerIndexedBlock: "indexed_block", ddt.CombinerHVector: "hvector", ddt.CombinerHIndexed: "hindexed",
	ddt.CombinerHIndexedBlock: "hindexed_block", ddt.CombinerStruct: "struct",
}

// recipe is a parsed recipe: the case lines and, per case, its type lines.
type recipe struct {
	cases []recipeCase
	types [][][]string // per case, per type line, its tokens after "type ID"
}

// readRecipe parses a recipe; anything malformed is an error wrapping
// errRecipe and naming the line.
func readRecipe(r io.Reader) (*recipe, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	rp := &recipe{}
	ln := 0
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: line %d: %s", errRecipe, ln, fmt.Sprintf(format, a...))
	}
	want := 0 // type lines still owed by the current case
	for sc.Scan() {
		ln++
		f := strings.Fields(sc.Text())
		if ln == 1 {
			if len(f) != 2 || f[0] != "ddtpp" || f[1] != strconv.Itoa(recipeVersion) {
				return nil, bad("want the header \"ddtpp %d\"", recipeVersion)
			}
			continue
		}
		if len(f) == 0 {
			return nil, bad("empty line")
		}
		switch f[0] {
		case "case":
			if want > 0 {
				return nil, bad("case %v lacks %d type lines", rp.cases[len(rp.cases)-1], want)
			}
			if len(f) != 11 {
				return nil, bad("case line with %d fields, want 11", len(f))
			}
			var v [8]int64
			for i := range v {
				x, err := strconv.ParseInt(f[3+i], 10, 64)
				if err != nil || x < 0 {
					return nil, bad("field %d %q: want a non-negative integer", 4+i, f[3+i])
				}
				v[i] = x
			}
			rc := recipeCase{name: f[1], size: f[2], count: int(v[0]), typed: int(v[1]), bytes: v[2], tsize: v[3], extent: v[4],
				iters: int(v[5]), warmup: int(v[6]), ntypes: int(v[7])}
			if rc.iters < 1 || rc.ntypes < 1 {
				return nil, bad("case %v: ITERS and NTYPES must be at least 1", rc)
			}
			rp.cases = append(rp.cases, rc)
			rp.types = append(rp.types, nil)
			want = rc.ntypes
		case "type":
			k := len(rp.cases) - 1
			if want == 0 {
				return nil, bad("type line outside a case")
			}
			if len(f) < 3 || f[1] != strconv.Itoa(len(rp.types[k])) {
				return nil, bad("type line: want \"type %d KIND ARGS\"", len(rp.types[k]))
			}
			rp.types[k] = append(rp.types[k], f[2:])
			want--
		default:
			return nil, bad("unknown item %q", f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if ln == 0 {
		return nil, fmt.Errorf("%w: empty", errRecipe)
	}
	if want > 0 {
		return nil, bad("case %v lacks %d type lines", rp.cases[len(rp.cases)-1], want)
	}
	return rp, nil
}

// buildType builds case k's type from its type lines with ddt's
// constructors: the recipe read back as the MPI program reads it.
func (rp *recipe) buildType(k int) (*ddt.Type, error) {
	var built []*ddt.Type
	for id, f := range rp.types[k] {
		t, err := buildOne(f, built)
		if err != nil {
			return nil, fmt.Errorf("%w: case %v type %d: %w", errRecipe, rp.cases[k], id, err)
		}
		built = append(built, t)
	}
	t := built[len(built)-1]
	if err := t.Commit(); err != nil {
		return nil, err
	}
	return t, nil
}

// buildOne builds one type line (its tokens from KIND on) over the types
// built before it.
func buildOne(f []string, built []*ddt.Type) (*ddt.Type, error) {
	kind, args := f[0], f[1:]
	pos := 0
	next := func() (int64, error) {
		if pos >= len(args) {
			return 0, fmt.Errorf("%s: too few arguments", kind)
		}
		x, err := strconv.ParseInt(args[pos], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: argument %d %q: %w", kind, pos+1, args[pos], err)
		}
		pos++
		return x, nil
	}
	nums := func(n int64) ([]int64, error) {
		if n < 0 || n > int64(len(args)) {
			return nil, fmt.Errorf("%s: count %d out of range", kind, n)
		}
		v := make([]int64, n)
		for i := range v {
			x, err := next()
			if err != nil {
				return nil, err
			}
			v[i] = x
		}
		return v, nil
	}
	ref := func() (*ddt.Type, error) {
		x, err := next()
		if err != nil {
			return nil, err
		}
		if x < 0 || x >= int64(len(built)) {
			return nil, fmt.Errorf("%s: type %d not defined before", kind, x)
		}
		return built[x], nil
	}
	toInts := func(v []int64) []int {
		o := make([]int, len(v))
		for i, x := range v {
			o[i] = int(x)
		}
		return o
	}
	var t *ddt.Type
	var err error
	switch kind {
	case "named":
		if len(args) != 1 || namedTypes[args[0]] == nil {
			return nil, fmt.Errorf("named: unknown type %q", strings.Join(args, " "))
		}
		return namedTypes[args[0]], nil
	case "contiguous", "vector", "hvector", "resized":
		n := map[string]int{"contiguous": 1, "vector": 3, "hvector": 3, "resized": 2}[kind]
		v, e := nums(int64(n))
		if e != nil {
			return nil, e
		}
		old, e := ref()
		if e != nil {
			return nil, e
		}
		switch kind {
		case "contiguous":
			t, err = ddt.Contiguous(int(v[0]), old)
		case "vector":
			t, err = ddt.Vector(int(v[0]), int(v[1]), int(v[2]), old)
		case "hvector":
			t, err = ddt.HVector(int(v[0]), int(v[1]), v[2], old)
		default:
			t, err = ddt.Resized(old, v[0], v[1])
		}
	case "indexed", "hindexed", "indexed_block", "hindexed_block", "struct":
		n, e := next()
		if e != nil {
			return nil, e
		}
		nb := n
		if kind == "indexed_block" || kind == "hindexed_block" {
			nb = 1
		}
		bl, e := nums(nb)
		if e != nil {
			return nil, e
		}
		d, e := nums(n)
		if e != nil {
			return nil, e
		}
		nt := int64(1) // component types: one, or one per struct member
		if kind == "struct" {
			nt = n
		}
		var olds []*ddt.Type
		for range nt {
			o, e := ref()
			if e != nil {
				return nil, e
			}
			olds = append(olds, o)
		}
		switch kind {
		case "indexed":
			t, err = ddt.Indexed(toInts(bl), toInts(d), olds[0])
		case "hindexed":
			t, err = ddt.HIndexed(toInts(bl), d, olds[0])
		case "indexed_block":
			t, err = ddt.IndexedBlock(int(bl[0]), toInts(d), olds[0])
		case "hindexed_block":
			t, err = ddt.HIndexedBlock(int(bl[0]), d, olds[0])
		default:
			t, err = ddt.Struct(toInts(bl), d, olds)
		}
	case "subarray":
		n, e := next()
		if e != nil {
			return nil, e
		}
		v, e := nums(3 * n)
		if e != nil {
			return nil, e
		}
		if pos >= len(args) {
			return nil, errors.New("subarray: no order")
		}
		order := ddt.OrderC
		switch args[pos] {
		case "c":
		case "fortran":
			order = ddt.OrderFortran
		default:
			return nil, fmt.Errorf("subarray: order %q (want c or fortran)", args[pos])
		}
		pos++
		old, e := ref()
		if e != nil {
			return nil, e
		}
		t, err = ddt.Subarray(toInts(v[:n]), toInts(v[n:2*n]), toInts(v[2*n:]), order, old)
	case "dup":
		old, e := ref()
		if e != nil {
			return nil, e
		}
		t, err = ddt.Dup(old)
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return nil, err
	}
	if pos != len(args) {
		return nil, fmt.Errorf("%s: %d arguments left over", kind, len(args)-pos)
	}
	return t, nil
}
