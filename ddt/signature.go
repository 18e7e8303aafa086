package ddt

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"sync/atomic"
)

// Type signatures (MPI's rule for matching a send with a receive): the
// sequence of predefined elements a message carries. A receive may take a
// message whose signature is a prefix of its own; anything else (int32
// data received as float32, struct fields of other types) is an error.
//
// A signature is summarised by a polynomial hash over its elements,
// h(e0 e1 … e(n-1)) = Σ sym(ei)·B^i mod 2^61−1, which composes: the hash of
// a concatenation is h(a) + B^len(a)·h(b) and that of k repetitions of a
// is h(a)·(1 + x + … + x^(k−1)) with x = B^len(a), a geometric sum worked
// out in O(log k). So the hash of count elements, or of the prefix of
// them that a number of bytes covers, costs a walk down the type's
// constructor tree (one path for a prefix), never a walk over its
// elements. Byte's symbol is 0: a signature of bytes alone hashes to 0,
// which means "untyped" and matches anything (MPI_PACKED's role).

const sigMod = 1<<61 - 1

// sigBase is the hash's base (an arbitrary large odd constant below the
// modulus).
const sigBase = 0x1b873593a5e6f1d

// sig is the signature of one instance of a type: its hash and its
// length in predefined elements.
type sig struct{ h, n uint64 }

func mulmod(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	// (hi·2^64 + lo) mod 2^61−1
	x := (lo & sigMod) + (lo >> 61) + (hi << 3 & sigMod) + (hi >> 58)
	for x >= sigMod {
		x -= sigMod
	}
	return x
}

func addmod(a, b uint64) uint64 {
	x := a + b
	if x >= sigMod {
		x -= sigMod
	}
	return x
}

func powmod(x, e uint64) uint64 {
	r := uint64(1)
	for ; e > 0; e >>= 1 {
		if e&1 != 0 {
			r = mulmod(r, x)
		}
		x = mulmod(x, x)
	}
	return r
}

// geom returns 1 + x + … + x^(k−1) mod the modulus.
func geom(x, k uint64) uint64 {
	// s(k) for k = 2m: s(m)·(1 + x^m); k = 2m+1: s(2m) + x^(2m).
	if k == 0 {
		return 0
	}
	s, p := uint64(1), x // s = geom(x, j), p = x^j for j = 1
	for bit := 63 - bits.LeadingZeros64(k) - 1; bit >= 0; bit-- {
		s = mulmod(s, addmod(1, p)) // j → 2j
		p = mulmod(p, p)
		if k>>uint(bit)&1 != 0 { // 2j → 2j+1
			s = addmod(s, p)
			p = mulmod(p, x)
		}
	}
	return s
}

func (a sig) cat(b sig) sig {
	return sig{addmod(a.h, mulmod(powmod(sigBase, a.n%(sigMod-1)), b.h)), a.n + b.n}
}

func (a sig) rep(k uint64) sig {
	return sig{mulmod(a.h, geom(powmod(sigBase, a.n%(sigMod-1)), k)), a.n * k}
}

// symbol is a predefined type's element symbol (0 for Byte).
func symbol(t *Type) uint64 {
	if t == Byte {
		return 0
	}
	f := fnv.New64a()
	f.Write([]byte(t.name))
	return f.Sum64()%(sigMod-1) + 1
}

// signature returns the signature of one instance of t.
func (t *Type) signature() sig {
	if s := t.sigCache.Load(); s != nil {
		return *s
	}
	var s sig
	switch {
	case t.size == 0:
	case t.comb == CombinerNamed:
		s = sig{symbol(t), 1}
	case t.comb == CombinerStruct:
		for i, m := range t.types {
			if k := t.ints[1+i]; k > 0 && m.size > 0 {
				s = s.cat(m.signature().rep(uint64(k)))
			}
		}
	default: // every other constructor repeats its one component
		old := t.types[0]
		s = old.signature().rep(uint64(t.size / old.size))
	}
	t.sigCache.Store(&s)
	return s
}

// prefix returns the signature of the first m bytes (0 ≤ m ≤ k·size) of k
// instances of t; ok is false when m ends inside a predefined element.
func (t *Type) prefix(k uint64, m int64) (sig, bool) {
	if m == 0 || t.size == 0 {
		return sig{}, true
	}
	full := uint64(m / t.size)
	if full >= k {
		return t.signature().rep(k), true
	}
	s := t.signature().rep(full)
	rest := m - int64(full)*t.size
	if rest == 0 {
		return s, true
	}
	var p sig
	switch t.comb {
	case CombinerNamed:
		return sig{}, false
	case CombinerStruct:
		for i, mt := range t.types {
			bl := int64(t.ints[1+i])
			if bl <= 0 || mt.size == 0 {
				continue
			}
			if w := bl * mt.size; rest >= w {
				p = p.cat(mt.signature().rep(uint64(bl)))
				rest -= w
				if rest == 0 {
					break
				}
				continue
			}
			q, ok := mt.prefix(uint64(bl), rest)
			if !ok {
				return sig{}, false
			}
			p = p.cat(q)
			break
		}
	default:
		old := t.types[0]
		q, ok := old.prefix(uint64(t.size/old.size), rest)
		if !ok {
			return sig{}, false
		}
		p = q
	}
	return s.cat(p), true
}

// Signature returns the hash of the type signature of the first nbytes
// packed bytes of count elements of t: the sequence of predefined
// elements they hold, as MPI matches a send against a receive. Two
// layouts carry the same data exactly when their signatures over the
// message's bytes hash alike (a column and a row of float64s do;
// int32s and float32s do not). A signature of Byte elements only hashes
// to 0, the value for "untyped" that matches anything. An nbytes that
// ends inside a predefined element, or exceeds the elements' size, gives
// an error wrapping ErrInvalid.
func (t *Type) Signature(count int, nbytes int64) (uint64, error) {
	s, err := t.sigOf("Signature", count, nbytes)
	return s.Hash, err
}

// Sig is a type signature in a form that concatenates: the hash
// Signature returns and the number of predefined elements it covers.
// The signature of a message made of several parts, each its own count
// of its own type, is the parts' signatures joined with Then.
type Sig struct {
	Hash  uint64 // Signature's hash (0: bytes only, untyped)
	Elems uint64 // predefined elements (Byte ones included)
}

// SigOf returns the signature of the first nbytes packed bytes of count
// elements of t, as Signature, with its length in elements. Errors are
// Signature's.
func (t *Type) SigOf(count int, nbytes int64) (Sig, error) {
	return t.sigOf("SigOf", count, nbytes)
}

func (t *Type) sigOf(op string, count int, nbytes int64) (Sig, error) {
	if _, err := t.committedState(op); err != nil {
		return Sig{}, err
	}
	if s, ok := t.sigLast.get(count, nbytes); ok {
		return s, nil // a message of the same shape as the last: the hash costs tens of multiplications
	}
	size, err := t.PackSize(count)
	if err != nil {
		return Sig{}, err
	}
	if nbytes < 0 || nbytes > size {
		return Sig{}, fmt.Errorf("ddt: %s of %d bytes of %d elements of %s (%d bytes): %w", op, nbytes, count, t.Name(), size, ErrInvalid)
	}
	s, ok := t.prefix(uint64(count), nbytes)
	if !ok {
		return Sig{}, fmt.Errorf("ddt: %s: %d bytes end inside an element of %s: %w", op, nbytes, t.Name(), ErrInvalid)
	}
	out := Sig{Hash: s.h, Elems: s.n}
	t.sigLast.put(count, nbytes, out)
	return out, nil
}

// sigMemo holds the signature last computed, for count elements and
// nbytes bytes of them: repeated messages of one shape (a halo exchange,
// a rate loop) find theirs without the modular arithmetic. It is a
// sequence lock: a writer makes seq odd (one writer at a time; another
// skips its store), writes, and makes it even again; a reader that sees
// seq odd or changed misses. Nothing is allocated.
type sigMemo struct {
	seq                        atomic.Uint64
	count, nbytes, hash, elems atomic.Uint64
}

// get returns the memo's signature if it is for count and nbytes.
func (m *sigMemo) get(count int, nbytes int64) (Sig, bool) {
	s1 := m.seq.Load()
	if s1 == 0 || s1&1 != 0 || m.count.Load() != uint64(count) || m.nbytes.Load() != uint64(nbytes) {
		return Sig{}, false
	}
	s := Sig{Hash: m.hash.Load(), Elems: m.elems.Load()}
	return s, m.seq.Load() == s1
}

// put stores s as the signature of count elements, nbytes bytes of them,
// unless another goroutine is storing one.
func (m *sigMemo) put(count int, nbytes int64, s Sig) {
	s1 := m.seq.Load()
	if s1&1 != 0 || !m.seq.CompareAndSwap(s1, s1+1) {
		return
	}
	m.count.Store(uint64(count))
	m.nbytes.Store(uint64(nbytes))
	m.hash.Store(s.Hash)
	m.elems.Store(s.Elems)
	m.seq.Store(s1 + 2)
}

// Then returns the signature of s's elements followed by next's.
func (s Sig) Then(next Sig) Sig {
	c := sig{s.Hash, s.Elems}.cat(sig{next.Hash, next.Elems})
	return Sig{Hash: c.h, Elems: c.n}
}
