// Package ddt implements MPI-style derived datatypes: constructors mirroring
// MPI (Contiguous, Vector, HVector, Indexed, HIndexed, IndexedBlock,
// HIndexedBlock, Struct, Subarray, Resized, Dup) and Go-native ones built by
// reflection, commit-time normalisation into a DAME-style loop IR (see
// docs/ddt-ir.md; Type.DumpIR prints it), and a resumable interpreter that
// packs and unpacks any byte range of the packed stream.
//
// Importing package jit registers it as the compiler; committed types then
// pack through generated code, with the interpreter as the fallback and the
// oracle. WEFT_JIT=auto|on|off selects the default mode; off is also a
// process-wide switch that no per-type mode overrides.
package ddt

import "github.com/weft-hpc/weft/internal/wlog"

var log = wlog.Named("ddt")
