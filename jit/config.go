package jit

import "github.com/weft-hpc/weft/internal/settings"

// Knobs come from WEFT_TUNE (internal/settings, docs/tuning.md), parsed
// once per process; WEFT_JIT (auto|on|off) is read by package ddt ("off"
// also stops jit from registering). A bad WEFT_TUNE leaves every knob at its
// default here and is reported by ddt.Commit, endpoint.Init, onesided's
// window creation and fabric.GetInfo.
var tune, _ = settings.Tune()

var (
	chunkBytes   = int64(1 << 20)
	cacheEntries = 1024
)

// pick returns v unless it is settings.Auto, else def (knobs whose default
// is worked out from the CPU's caches).
func pick(v, def int64) int64 {
	if v == settings.Auto {
		return def
	}
	return v
}

func init() {
	t := tune
	chunkBytes = t.JITChunk
	unrollMax = t.JITUnroll
	repMin = t.JITRepMin
	maxBodyBlocks = t.JITBody
	indexBody = t.JITIndexBody
	pairMoves = t.JITPair
	transposeTile = t.JITTile
	transposeBandBytes = t.JITBand
	cacheEntries = int(t.JITCache)
	regTileOn = t.JITRT
	regTileBand = t.JITRTBand
	regTileRows = t.JITRTTile
	regTileSmall = pick(t.JITRTSmall, regTileSmall)
	regTileSBand = t.JITRTSBand
	regTileSRows = t.JITRTSTile
	regTileNTBand = t.JITRTNTBand
	regTileNTRows = t.JITRTNTTile
	regTileUBand = t.JITRTUBand
	regTileURows = t.JITRTUTile
	regTileNTMin = pick(t.JITRTNTMin, regTileNTMin)
	regTileUNTMin = pick(t.JITRTUNTMin, regTileUNTMin)
	ntMin = pick(t.JITNTMin, ntMin)
	autoBlocks = t.JITAuto
}
