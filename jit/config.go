package jit

import (
	"encoding/binary"
	"reflect"

	"github.com/weft-hpc/weft/internal/cpucache"
	"github.com/weft-hpc/weft/internal/settings"
)

// Knobs come from WEFT_TUNE (internal/settings, docs/tuning.md), parsed
// once per process; WEFT_JIT (auto|on|off) is read by package ddt ("off"
// also stops jit from registering). A bad WEFT_TUNE leaves every knob at its
// default here and is reported by ddt.Commit, endpoint.Init, onesided's
// window creation and fabric.GetInfo.
var tune, _ = settings.Tune()

// cacheEntries is the size of the code cache (WEFT_TUNE jitcache).
var cacheEntries = int(tune.JITCache)

// config is the shape of the code one compilation generates and how its
// kernel runs: WEFT_TUNE's jit knobs and a few internal limits. The compile
// entry points take one (compileWith, compiler.cfg; defaultConfig when
// none), so tests compile with their own limits without touching package
// state. A config is read-only once made (newConfig, with): key, the code
// cache's part for it, covers every field.
type config struct {
	chunkBytes int64 // packed bytes per call into generated code (jitchunk)
	autoBlocks int64 // auto policy: blocks walked before compiling (jitauto; 0: at Commit)

	// Copy thresholds (jitunroll, jitrepmin, jitntmin).
	unrollMax int64 // blocks up to this size are copied by unrolled moves
	repMin    int64 // blocks from this size use rep movsb (with ERMS)
	ntMin     int64 // blocks from this size use non-temporal stores

	// Bodies (jitbody, jitindexbody, jitpair).
	maxBodyBlocks  int64 // blocks unrolled into one body
	indexBody      int64 // index lists over one small block of at most this many entries are unrolled into the body
	unrollLoop     int64 // a loop/index of at most this many blocks is unrolled into the body...
	unrollLoopSize int64 // ...when it copies at most this many bytes
	pairMoves      bool  // two adjacent 4-byte blocks of a body move as one 8-byte access

	// Cache-blocked transposes (jittile, jitband).
	transposeTile      int64 // inner rows per tile (L1 is 8-way: rows 4 KiB apart share a set)
	transposeBandBytes int64 // band*blocklen target

	// Register-tiled transposes (the jitrt* knobs).
	regTileOn     bool
	regTileBand   int64 // pack: columns (parent instances) per band, multiple of 4
	regTileRows   int64 // pack: rows per tile, multiple of 4
	regTileSmall  int64 // pack: rows spanning at most this many typed bytes (rows × row stride) use the in-cache shape below
	regTileSBand  int64 // pack, in-cache shape: columns per band
	regTileSRows  int64 // pack, in-cache shape: rows per tile
	regTileNTBand int64 // pack with non-temporal stores: columns per band
	regTileNTRows int64 // pack with non-temporal stores: rows per tile
	regTileUBand  int64 // unpack: columns per band
	regTileURows  int64 // unpack: rows per tile
	regTileNTMin  int64 // bytes per Pack call from which stores are non-temporal (packed data that cannot stay in the core's L2)
	regTileUNTMin int64 // bytes per Unpack call from which stores are non-temporal (typed data beyond the LLC)

	dualMap bool // W^X by two views of one memfd (jitdualmap); else mprotect per compile

	key string // every field above, encoded (finish); part of the code cache key
}

// pick returns v unless it is settings.Auto, else def (knobs whose default
// is worked out from the CPU's caches).
func pick(v, def int64) int64 {
	if v == settings.Auto {
		return def
	}
	return v
}

// newConfig returns the configuration of the tuning t.
func newConfig(t *settings.Tuning) *config {
	c := &config{
		chunkBytes:         t.JITChunk,
		autoBlocks:         t.JITAuto,
		unrollMax:          t.JITUnroll,
		repMin:             t.JITRepMin,
		ntMin:              pick(t.JITNTMin, 1<<62), // off by default
		maxBodyBlocks:      t.JITBody,
		indexBody:          t.JITIndexBody,
		unrollLoop:         16,
		unrollLoopSize:     1024,
		pairMoves:          t.JITPair,
		transposeTile:      t.JITTile,
		transposeBandBytes: t.JITBand,
		regTileOn:          t.JITRT,
		regTileBand:        t.JITRTBand,
		regTileRows:        t.JITRTTile,
		regTileSmall:       pick(t.JITRTSmall, cpucache.Size(2, 1<<20)),
		regTileSBand:       t.JITRTSBand,
		regTileSRows:       t.JITRTSTile,
		regTileNTBand:      t.JITRTNTBand,
		regTileNTRows:      t.JITRTNTTile,
		regTileUBand:       t.JITRTUBand,
		regTileURows:       t.JITRTUTile,
		regTileNTMin:       pick(t.JITRTNTMin, 2*cpucache.Size(2, 1<<20)),
		regTileUNTMin:      pick(t.JITRTUNTMin, cpucache.LastLevel(32<<20)),
		dualMap:            t.JITDualMap,
	}
	return c.finish()
}

// defaultConfig is WEFT_TUNE's, made once; it is never modified.
var defaultConfig = newConfig(tune)

// with returns a copy of c changed by set (tests), with its key remade.
func (c *config) with(set func(*config)) *config {
	d := *c
	set(&d)
	return d.finish()
}

// finish encodes every field but key into key and returns c. The encoding
// walks the struct, so a field added later is part of the key without
// further work (TestConfigKey checks it).
func (c *config) finish() *config {
	v := reflect.ValueOf(c).Elem()
	b := make([]byte, 0, 2*v.NumField())
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int64:
			b = binary.AppendVarint(b, f.Int())
		case reflect.Bool:
			if f.Bool() {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case reflect.String: // key itself
		default:
			panic("jit: config field of kind " + f.Kind().String()) // a programming error in jit itself
		}
	}
	c.key = string(b)
	return c
}
