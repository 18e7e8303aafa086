package jit

import (
	"os"
	"strconv"
	"strings"
)

// Knobs, read once at package initialisation. Every knob is an environment
// variable; docs/jit.md lists them with their defaults.
//
//	WEFT_JIT             auto|on|off (read by package ddt; "off" also stops jit from registering)
//	WEFT_JIT_ISA         sse2|avx2|avx512: cap the vector width used
//	WEFT_JIT_CHUNK       bytes of packed stream per call into generated code (default 1 MiB)
//	WEFT_JIT_AUTO_BLOCKS auto policy: blocks moved before a type is compiled (2000; 0 = at Commit)
//	WEFT_JIT_UNROLL_MAX  blocks up to this many bytes are copied by unrolled moves (512)
//	WEFT_JIT_REP_MIN     blocks from this size use rep movsb (4096)
//	WEFT_JIT_BODY_BLOCKS blocks unrolled into one loop body at most (2048)
//	WEFT_JIT_INDEX_BODY  index lists over one block of ≤ 64 bytes with at most this many entries are unrolled into the body (1024)
//	WEFT_JIT_PAIR        1: two consecutive 4-byte blocks of a body move as one 8-byte packed access; 0: off (default 1)
//	WEFT_JIT_TILE        inner rows per tile of transpose-shaped types (8)
//	WEFT_JIT_BAND_BYTES  bytes per band row of transpose-shaped types (128)
//	WEFT_JIT_RT          1: register-tiled transposes (AVX-512, 16-byte elements); 0: off (default 1)
//	WEFT_JIT_RT_BAND     register-tiled transpose, pack: columns per band (multiple of 4, default 8)
//	WEFT_JIT_RT_TILE     register-tiled transpose, pack: rows per tile (multiple of 4, default 8)
//	WEFT_JIT_RT_SMALL    register-tiled transpose, pack: rows spanning at most this many bytes use the in-cache shape (default: the L2 size)
//	WEFT_JIT_RT_SBAND    register-tiled transpose, pack, in-cache shape: columns per band (default 16)
//	WEFT_JIT_RT_STILE    register-tiled transpose, pack, in-cache shape: rows per tile (default 32)
//	WEFT_JIT_RT_NTBAND   register-tiled transpose, pack with non-temporal stores: columns per band (default 32)
//	WEFT_JIT_RT_NTTILE   register-tiled transpose, pack with non-temporal stores: rows per tile (default 8)
//	WEFT_JIT_RT_UBAND    register-tiled transpose, unpack: columns per band (default 32)
//	WEFT_JIT_RT_UTILE    register-tiled transpose, unpack: rows per tile (default 8)
//	WEFT_JIT_RT_PREFETCH register-tiled transpose: prefetch the rows this many tiles ahead (0: off)
//	WEFT_JIT_RT_NT_MIN   register-tiled transpose, pack: non-temporal stores from this many bytes per call (default: twice the L2 size)
//	WEFT_JIT_RT_UNT_MIN  register-tiled transpose, unpack: non-temporal stores from this many bytes per call (default: the last-level cache size)
//	WEFT_JIT_NT_MIN      blocks from this size use non-temporal stores + sfence (default off)
//	WEFT_JIT_GATHER      1: AVX-512 gathers for index lists of 4/8-byte blocks (pack); default 0
//	WEFT_JIT_CACHE       compiled types kept in the code cache (1024)
//	WEFT_JIT_DUAL_MAP    1: W^X by two views (RW, RX) of one memfd, no syscall per compile; 0: mprotect per compile (default 1)
var (
	chunkBytes   = int64(1 << 20)
	cacheEntries = 1024
)

func envInt(name string, def int64, lo, hi int64) int64 {
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil || v < lo || v > hi {
		log.Warn("ignoring bad value", "env", name, "value", s, "min", lo, "max", hi)
		return def
	}
	return v
}

func init() {
	chunkBytes = envInt("WEFT_JIT_CHUNK", chunkBytes, 4096, 1<<30)
	unrollMax = envInt("WEFT_JIT_UNROLL_MAX", unrollMax, 64, 1<<16)
	repMin = envInt("WEFT_JIT_REP_MIN", repMin, 256, 1<<40)
	maxBodyBlocks = envInt("WEFT_JIT_BODY_BLOCKS", maxBodyBlocks, 1, 1<<16)
	indexBody = envInt("WEFT_JIT_INDEX_BODY", indexBody, 0, 1<<16)
	pairMoves = envInt("WEFT_JIT_PAIR", 1, 0, 1) == 1
	transposeTile = envInt("WEFT_JIT_TILE", transposeTile, 1, 256)
	transposeBandBytes = envInt("WEFT_JIT_BAND_BYTES", transposeBandBytes, 1, 1<<16)
	cacheEntries = int(envInt("WEFT_JIT_CACHE", int64(cacheEntries), 0, 1<<20))
	regTileOn = envInt("WEFT_JIT_RT", 1, 0, 1) == 1
	regTileBand = envInt("WEFT_JIT_RT_BAND", regTileBand, 4, 256)
	regTileRows = envInt("WEFT_JIT_RT_TILE", regTileRows, 4, 256)
	regTileSmall = envInt("WEFT_JIT_RT_SMALL", regTileSmall, 0, 1<<62)
	regTileSBand = envInt("WEFT_JIT_RT_SBAND", regTileSBand, 4, 256)
	regTileSRows = envInt("WEFT_JIT_RT_STILE", regTileSRows, 4, 256)
	regTileNTBand = envInt("WEFT_JIT_RT_NTBAND", regTileNTBand, 4, 256)
	regTileNTRows = envInt("WEFT_JIT_RT_NTTILE", regTileNTRows, 4, 256)
	regTileUBand = envInt("WEFT_JIT_RT_UBAND", regTileUBand, 4, 256)
	regTileURows = envInt("WEFT_JIT_RT_UTILE", regTileURows, 4, 256)
	regTilePF = envInt("WEFT_JIT_RT_PREFETCH", regTilePF, 0, 64)
	regTileNTMin = envInt("WEFT_JIT_RT_NT_MIN", regTileNTMin, 0, 1<<62)
	regTileUNTMin = envInt("WEFT_JIT_RT_UNT_MIN", regTileUNTMin, 0, 1<<62)
	ntMin = envInt("WEFT_JIT_NT_MIN", ntMin, 256, 1<<62)
	gatherOn = envInt("WEFT_JIT_GATHER", 0, 0, 1) == 1
	autoBlocks = envInt("WEFT_JIT_AUTO_BLOCKS", autoBlocks, 0, 1<<50)
}
