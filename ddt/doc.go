// Package ddt implements MPI-style derived datatypes: constructors mirroring
// MPI (Contiguous, Vector, HVector, Indexed, HIndexed, IndexedBlock,
// HIndexedBlock, Struct, Subarray, Resized, Dup) and Go-native ones built by
// reflection, commit-time normalisation into a DAME-style loop IR (see
// ir.go and docs/ddt-ir.md), and a resumable interpreter that packs and
// unpacks any byte range of the packed stream.
//
// A Compiler (package jit) may be registered with SetCompiler; committed types
// then pack through its Kernel, with the interpreter as the fallback and the
// oracle. WEFT_JIT=auto|on|off selects the default mode.
package ddt

import "github.com/weft-hpc/weft/internal/wlog"

var log = wlog.Named("ddt")
