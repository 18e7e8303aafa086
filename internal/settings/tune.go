package settings

import (
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// TuneEnv is the variable that carries every tuning knob:
// WEFT_TUNE=key=value,key=value (GODEBUG style). docs/tuning.md lists the
// keys.
const TuneEnv = "WEFT_TUNE"

// Auto is the value of a knob whose default is worked out at run time (a
// cache size, a policy's own figure); Tuning fields hold it until set.
const Auto = -1

// Tuning holds every tuning knob. The zero value is not meaningful: use
// Tune, or Defaults.
type Tuning struct {
	// fabric
	PollPace  int64         // clock reads between two empty polls of the spinning calls
	PollYield time.Duration // Gosched interval of a goroutine polling CQs through cgo (0: off)
	MRCache   int64         // unreferenced registrations a domain keeps
	HugePages bool          // Alloc tries 2 MiB pages
	ShmSweep  bool          // remove stale shm-provider regions of dead processes once

	// endpoint
	EPSpin       int64  // empty polls between context checks and yields of a wait
	EPOSYield    int64  // every N-th yield is sched_yield (0: never)
	EPWait       string // auto, spin or yield: how endpoint waits pause on crowded nodes
	NodeCells    int64  // cells per ring of the node transport
	NodeInline   int64  // largest message sent inline in a ring
	NodeMedium   int64  // largest message copied through a per-pair slot
	NodeCopy     int64  // smallest message copied in fragments through the per-pair copy area (pipelined; 0: off)
	NodeCopySlot int64  // bytes per slot (fragment) of the copy area
	NodeWay      string // auto, pipe or single: how large node sends to another process go
	TypedPath    string // auto, zerocopy, pipeline or pack: how large typed messages go over libfabric
	ZCBlock      int64  // average block bytes from which a large typed message goes by iovec RMA
	PipeSeg      int64  // bytes per segment of a pipelined typed message
	PipeDepth    int64  // registered segment buffers per endpoint
	PipeMin      int64  // packed bytes from which a small-block typed message to a libfabric peer is pipelined, not packed whole
	GPUChunk     int64  // stream bytes one kernel packs or unpacks in a pipelined GPU message
	NodePipe     int64  // bytes a node-transport typed send packs between two progress marks (0: pack whole first)
	NodeGather   int64  // average block bytes from which a node-transport typed message is gathered, not packed
	EPMatchHdr   bool   // carry the match word in a header, not in remote CQ data

	// onesided
	OSSpin     int64         // spin phase as a poll count (Auto: the policy's time)
	OSSpinFor  time.Duration // spin phase (Auto: the policy's)
	OSYieldFor time.Duration // yield phase (Auto: the policy's)
	OSNapMax   time.Duration // longest nap (Auto: the policy's)
	OSInject   bool          // PutSignal through injected writes
	HeapCheck  bool          // Heap checks every block header on each call

	// jit
	JITISA       string // cap of the vector width: sse2, avx2, avx512 ("": the CPU's)
	JITChunk     int64
	JITAuto      int64
	JITUnroll    int64
	JITRepMin    int64
	JITBody      int64
	JITIndexBody int64
	JITPair      bool
	JITTile      int64
	JITBand      int64
	JITCache     int64
	JITNTMin     int64
	JITRT        bool
	JITRTBand    int64
	JITRTTile    int64
	JITRTSmall   int64
	JITRTSBand   int64
	JITRTSTile   int64
	JITRTNTBand  int64
	JITRTNTTile  int64
	JITRTUBand   int64
	JITRTUTile   int64
	JITRTNTMin   int64
	JITRTUNTMin  int64
	JITDualMap   bool

	// collectives: algorithm per collective ("auto": by size) and the
	// size from which the large-message algorithm is used
	CollBcast          string
	CollReduce         string
	CollAllreduce      string
	CollGather         string
	CollScatter        string
	CollAllgather      string
	CollAllgatherv     string
	CollAlltoall       string
	CollReduceScatter  string
	CollScan           string
	CollHier           string
	CollBcastLarge     int64
	CollReduceLarge    int64
	CollAllreduceLarge int64
	CollGatherLarge    int64
	CollAllgatherLarge int64
	CollAlltoallLarge  int64
	CollNodeStream     int64
	CollStores         string // auto, stream or plain: the node level's copies into shared memory

	set []string // keys given in WEFT_TUNE
}

// Knob describes one key of WEFT_TUNE.
type Knob struct {
	Key     string
	Pkg     string
	Kind    Kind   // Int, Duration, Bool or Enum
	Default string // as written in WEFT_TUNE; "auto" for Auto
	Allowed []string
	Min     int64
	Max     int64
	Old     string // the variable it replaces ("" for none)
	Doc     string
	field   func(*Tuning) any
}

// Want describes the allowed values.
func (k *Knob) Want() string { return want(k.Kind, k.Allowed, k.Min, k.Max) }

const maxCount = int64(1) << 50

// Knobs lists the keys of WEFT_TUNE; docs/tuning.md is checked against it.
var Knobs = []Knob{
	{Key: "pollpace", Pkg: "fabric", Kind: Int, Default: "1", Min: 0, Max: 8, Old: "WEFT_POLL_PACE", Doc: "clock reads between two empty polls of fabric's spinning calls (0: back to back)", field: func(t *Tuning) any { return &t.PollPace }},
	{Key: "pollyield", Pkg: "fabric", Kind: Duration, Default: "1ms", Min: 0, Max: int64(time.Second), Old: "WEFT_POLL_YIELD", Doc: "a goroutine polling CQs through cgo yields (Gosched) this often (0: never)", field: func(t *Tuning) any { return &t.PollYield }},
	{Key: "mrcache", Pkg: "fabric", Kind: Int, Default: "64", Min: 0, Max: 1 << 20, Old: "WEFT_MR_CACHE_SIZE", Doc: "unreferenced memory registrations a domain keeps (0: none)", field: func(t *Tuning) any { return &t.MRCache }},
	{Key: "hugepages", Pkg: "fabric", Kind: Bool, Default: "1", Old: "WEFT_HUGEPAGES", Doc: "Domain.Alloc tries 2 MiB pages for multiples of 2 MiB", field: func(t *Tuning) any { return &t.HugePages }},
	{Key: "shmsweep", Pkg: "fabric", Kind: Bool, Default: "1", Old: "WEFT_SHM_SWEEP", Doc: "remove the shm provider's regions left by dead processes, once per process", field: func(t *Tuning) any { return &t.ShmSweep }},

	{Key: "epspin", Pkg: "endpoint", Kind: Int, Default: "16", Min: 1, Max: 1 << 20, Old: "WEFT_ENDPOINT_SPIN", Doc: "empty polls of an endpoint wait between context checks and, after 2048, between yields", field: func(t *Tuning) any { return &t.EPSpin }},
	{Key: "eposyield", Pkg: "endpoint", Kind: Int, Default: "4", Min: 0, Max: 1 << 20, Old: "WEFT_ENDPOINT_OSYIELD", Doc: "every N-th yield of an endpoint wait is a sched_yield (0: never)", field: func(t *Tuning) any { return &t.EPOSYield }},

	{Key: "epwait", Pkg: "endpoint", Kind: Enum, Default: "auto", Allowed: []string{"auto", "spin", "yield"}, Doc: "endpoint waits: auto (yield the core on every empty poll when a communicator has more endpoints on this machine than cores), spin (never), yield (always)", field: func(t *Tuning) any { return &t.EPWait }},
	{Key: "epmatchhdr", Pkg: "endpoint", Kind: Bool, Default: "0", Doc: "carry endpoint's 8-byte match word in a header in front of each libfabric message instead of in remote CQ data (on by itself with providers that grant fewer than 8 bytes of CQ data, as verbs;ofi_rxm); every rank must agree", field: func(t *Tuning) any { return &t.EPMatchHdr }},
	{Key: "nodecells", Pkg: "endpoint", Kind: Int, Default: "512", Min: 64, Max: 1 << 16, Doc: "64-byte cells per ring of the node transport (rounded down to a power of two; fewer when a node has many endpoints)", field: func(t *Tuning) any { return &t.NodeCells }},
	{Key: "nodeinline", Pkg: "endpoint", Kind: Int, Default: "2K", Min: 0, Max: 1 << 20, Doc: "largest message the node transport carries in its ring cells (from 256 bytes only when the pair's medium slots are busy); larger ones are copied once from the sender's buffer (capped at what half a ring holds)", field: func(t *Tuning) any { return &t.NodeInline }},
	{Key: "nodemedium", Pkg: "endpoint", Kind: Int, Default: "16K", Min: 0, Max: 1 << 20, Doc: "largest message the node transport copies in and out of a per-pair slot in the receiver's segment (rounded up to 64 bytes; 0: off; fewer slots, then none, when a node has many endpoints); larger ones, and medium ones when the slots are busy, are copied once from the sender's buffer", field: func(t *Tuning) any { return &t.NodeMedium }},
	{Key: "nodecopy", Pkg: "endpoint", Kind: Int, Default: "16K", Min: 0, Max: 1 << 40, Doc: "smallest message (above the eager limit) the node transport sends to a peer in another process through the pair's copy area, in fragments of a copy slot, the sender copying the next fragments in (with non-temporal stores) while the receiver copies the previous ones out: from a blocking Send, or from an Isend whose whole message fits in the free slots; other sends, and all on a crowded node, are copied once from the sender's buffer by the receiver. 0: off; docs/perf/endpoint.md", field: func(t *Tuning) any { return &t.NodeCopy }},
	{Key: "nodecopyslot", Pkg: "endpoint", Kind: Int, Default: "256K", Min: 4096, Max: 16 << 20, Doc: "bytes per slot of a pair's copy area (4 slots per pair, fewer when a node has many endpoints, none below 2)", field: func(t *Tuning) any { return &t.NodeCopySlot }},
	{Key: "nodeway", Pkg: "endpoint", Kind: Enum, Default: "auto", Allowed: []string{"auto", "pipe", "single"}, Doc: "how a send of nodecopy bytes or more to a node peer in another process goes: auto (each link times both ways on its sends and takes the faster per size, trying the other now and then), pipe (the pipelined copy), single (the receiver's one process_vm_readv); docs/endpoint.md", field: func(t *Tuning) any { return &t.NodeWay }},

	{Key: "typedpath", Pkg: "endpoint", Kind: Enum, Default: "auto", Allowed: []string{"auto", "zerocopy", "pipeline", "pack"}, Doc: "how typed messages above the eager limit go to a libfabric peer: auto (the cost model: zcblock, then pipemin), zerocopy (iovec RMA from and to the user's blocks), pipeline (packed in segments), pack (packed whole into a reused staging buffer, then a plain rendezvous)", field: func(t *Tuning) any { return &t.TypedPath }},
	{Key: "zcblock", Pkg: "endpoint", Kind: Int, Default: "64K", Min: 1, Max: 1 << 30, Doc: "average block size (bytes) from which a typed message above the eager limit moves its blocks by iovec RMA instead of the segment pipeline (libfabric peers; onesided typed transfers likewise)", field: func(t *Tuning) any { return &t.ZCBlock }},
	{Key: "pipeseg", Pkg: "endpoint", Kind: Int, Default: "16K", Min: 256, Max: 1 << 30, Doc: "bytes per segment of a pipelined typed message (capped at the eager limit); unset, the provider's inject size where that is at least 4 KiB (shm), else 16K", field: func(t *Tuning) any { return &t.PipeSeg }},
	{Key: "gpuchunk", Pkg: "endpoint", Kind: Int, Default: "256K", Min: 4096, Max: 64 << 20, Doc: "stream bytes one kernel launch packs or unpacks in a pipelined GPU message (4 chunks of pinned host memory per endpoint and device on each side; the sender's chunk goes out in pipeseg segments, the receiver gathers arriving segments into a chunk before its unpack)", field: func(t *Tuning) any { return &t.GPUChunk }},
	{Key: "pipemin", Pkg: "endpoint", Kind: Int, Default: "0", Min: 0, Max: 1 << 40, Doc: "packed size (bytes) from which a typed message above the eager limit whose blocks are too small for zero copy goes to a libfabric peer by the segment pipeline; a smaller one is packed whole into a reused staging buffer and sent by one rendezvous. Unset: 8M on shm and tcp, where one rendezvous beat the pipeline's many small messages (docs/perf/typed.md), 0 elsewhere", field: func(t *Tuning) any { return &t.PipeMin }},
	{Key: "pipedepth", Pkg: "endpoint", Kind: Int, Default: "8", Min: 1, Max: 256, Doc: "registered segment buffers per endpoint for pipelined and eager typed sends (segments in flight)", field: func(t *Tuning) any { return &t.PipeDepth }},

	{Key: "nodepipe", Pkg: "endpoint", Kind: Int, Default: "256K", Min: 0, Max: 1 << 30, Doc: "a typed message above the eager limit to a node-transport peer in another process is packed this many bytes at a time after its header has gone, the receiver copying and unpacking each piece while the next is packed (0: packed whole before the header)", field: func(t *Tuning) any { return &t.NodePipe }},
	{Key: "nodegather", Pkg: "endpoint", Kind: Int, Default: "16K", Min: 1, Max: 1 << 30, Doc: "average block size (bytes) from which a typed message above the eager limit to a node-transport peer is not packed: the receiver gathers the sender's blocks with process_vm_readv", field: func(t *Tuning) any { return &t.NodeGather }},

	{Key: "osspin", Pkg: "onesided", Kind: Int, Default: "auto", Min: 0, Max: maxCount, Old: "WEFT_ONESIDED_SPIN", Doc: "window waits spin this many polls instead of the policy's spin time (1e9: spin for ever)", field: func(t *Tuning) any { return &t.OSSpin }},
	{Key: "osspinfor", Pkg: "onesided", Kind: Duration, Default: "auto", Min: 0, Max: int64(time.Hour), Old: "WEFT_ONESIDED_SPIN_US", Doc: "spin phase of window waits (policy: 50µs spin, 2µs yield)", field: func(t *Tuning) any { return &t.OSSpinFor }},
	{Key: "osyieldfor", Pkg: "onesided", Kind: Duration, Default: "auto", Min: 0, Max: int64(time.Hour), Old: "WEFT_ONESIDED_YIELD_US", Doc: "yield phase of window waits (policy: 100ms spin, 1ms yield)", field: func(t *Tuning) any { return &t.OSYieldFor }},
	{Key: "osnapmax", Pkg: "onesided", Kind: Duration, Default: "auto", Min: 0, Max: int64(time.Hour), Old: "WEFT_ONESIDED_SLEEP_US", Doc: "longest nap of window waits (policy: 200µs)", field: func(t *Tuning) any { return &t.OSNapMax }},
	{Key: "osinject", Pkg: "onesided", Kind: Bool, Default: "1", Old: "WEFT_ONESIDED_INJECT", Doc: "PutSignal and small Puts use injected writes (0: tracked writes; cqdata ordering then unavailable)", field: func(t *Tuning) any { return &t.OSInject }},
	{Key: "heapcheck", Pkg: "onesided", Kind: Bool, Default: "0", Old: "WEFT_HEAP_CHECK", Doc: "onesided.Heap checks its block headers on every call", field: func(t *Tuning) any { return &t.HeapCheck }},

	{Key: "jitisa", Pkg: "jit", Kind: Enum, Default: "", Allowed: []string{"sse2|sse", "avx2|avx", "avx512"}, Old: "WEFT_JIT_ISA", Doc: "cap the vector width of generated code (default: what the CPU has)", field: func(t *Tuning) any { return &t.JITISA }},
	{Key: "jitchunk", Pkg: "jit", Kind: Int, Default: "1M", Min: 4096, Max: 1 << 30, Old: "WEFT_JIT_CHUNK", Doc: "bytes of packed stream per call into generated code", field: func(t *Tuning) any { return &t.JITChunk }},
	{Key: "jitauto", Pkg: "jit", Kind: Int, Default: "2000", Min: 0, Max: maxCount, Old: "WEFT_JIT_AUTO_BLOCKS", Doc: "auto mode: blocks moved by the interpreter before a type is compiled (0: at Commit)", field: func(t *Tuning) any { return &t.JITAuto }},
	{Key: "jitunroll", Pkg: "jit", Kind: Int, Default: "512", Min: 64, Max: 1 << 16, Old: "WEFT_JIT_UNROLL_MAX", Doc: "blocks up to this many bytes are copied by unrolled moves", field: func(t *Tuning) any { return &t.JITUnroll }},
	{Key: "jitrepmin", Pkg: "jit", Kind: Int, Default: "4K", Min: 256, Max: 1 << 40, Old: "WEFT_JIT_REP_MIN", Doc: "blocks from this many bytes use rep movsb", field: func(t *Tuning) any { return &t.JITRepMin }},
	{Key: "jitbody", Pkg: "jit", Kind: Int, Default: "2048", Min: 1, Max: 1 << 16, Old: "WEFT_JIT_BODY_BLOCKS", Doc: "blocks unrolled into one straight-line body at most", field: func(t *Tuning) any { return &t.JITBody }},
	{Key: "jitindexbody", Pkg: "jit", Kind: Int, Default: "1024", Min: 0, Max: 1 << 16, Old: "WEFT_JIT_INDEX_BODY", Doc: "index lists over one block of at most 64 bytes with up to this many entries become straight-line bodies", field: func(t *Tuning) any { return &t.JITIndexBody }},
	{Key: "jitpair", Pkg: "jit", Kind: Bool, Default: "1", Old: "WEFT_JIT_PAIR", Doc: "two adjacent 4-byte blocks of a body move as one 8-byte access", field: func(t *Tuning) any { return &t.JITPair }},
	{Key: "jittile", Pkg: "jit", Kind: Int, Default: "8", Min: 1, Max: 256, Old: "WEFT_JIT_TILE", Doc: "inner rows per tile of cache-blocked transposes", field: func(t *Tuning) any { return &t.JITTile }},
	{Key: "jitband", Pkg: "jit", Kind: Int, Default: "128", Min: 1, Max: 1 << 16, Old: "WEFT_JIT_BAND_BYTES", Doc: "bytes per band row of cache-blocked transposes", field: func(t *Tuning) any { return &t.JITBand }},
	{Key: "jitcache", Pkg: "jit", Kind: Int, Default: "1024", Min: 0, Max: 1 << 20, Old: "WEFT_JIT_CACHE", Doc: "compiled types kept in the code cache", field: func(t *Tuning) any { return &t.JITCache }},
	{Key: "jitntmin", Pkg: "jit", Kind: Int, Default: "auto", Min: 256, Max: 1 << 62, Old: "WEFT_JIT_NT_MIN", Doc: "blocks from this many bytes use non-temporal stores (default: never)", field: func(t *Tuning) any { return &t.JITNTMin }},
	{Key: "jitrt", Pkg: "jit", Kind: Bool, Default: "1", Old: "WEFT_JIT_RT", Doc: "register-tiled transposes of 16-byte elements on AVX-512", field: func(t *Tuning) any { return &t.JITRT }},
	{Key: "jitrtband", Pkg: "jit", Kind: Int, Default: "8", Min: 4, Max: 256, Old: "WEFT_JIT_RT_BAND", Doc: "register-tiled pack: columns per band (multiple of 4)", field: func(t *Tuning) any { return &t.JITRTBand }},
	{Key: "jitrttile", Pkg: "jit", Kind: Int, Default: "8", Min: 4, Max: 256, Old: "WEFT_JIT_RT_TILE", Doc: "register-tiled pack: rows per tile (multiple of 4)", field: func(t *Tuning) any { return &t.JITRTTile }},
	{Key: "jitrtsmall", Pkg: "jit", Kind: Int, Default: "auto", Min: 0, Max: 1 << 62, Old: "WEFT_JIT_RT_SMALL", Doc: "register-tiled pack: rows spanning at most this many bytes use the in-cache shape (default: the L2 size)", field: func(t *Tuning) any { return &t.JITRTSmall }},
	{Key: "jitrtsband", Pkg: "jit", Kind: Int, Default: "16", Min: 4, Max: 256, Old: "WEFT_JIT_RT_SBAND", Doc: "register-tiled pack, in-cache shape: columns per band", field: func(t *Tuning) any { return &t.JITRTSBand }},
	{Key: "jitrtstile", Pkg: "jit", Kind: Int, Default: "32", Min: 4, Max: 256, Old: "WEFT_JIT_RT_STILE", Doc: "register-tiled pack, in-cache shape: rows per tile", field: func(t *Tuning) any { return &t.JITRTSTile }},
	{Key: "jitrtntband", Pkg: "jit", Kind: Int, Default: "32", Min: 4, Max: 256, Old: "WEFT_JIT_RT_NTBAND", Doc: "register-tiled pack with non-temporal stores: columns per band", field: func(t *Tuning) any { return &t.JITRTNTBand }},
	{Key: "jitrtnttile", Pkg: "jit", Kind: Int, Default: "8", Min: 4, Max: 256, Old: "WEFT_JIT_RT_NTTILE", Doc: "register-tiled pack with non-temporal stores: rows per tile", field: func(t *Tuning) any { return &t.JITRTNTTile }},
	{Key: "jitrtuband", Pkg: "jit", Kind: Int, Default: "32", Min: 4, Max: 256, Old: "WEFT_JIT_RT_UBAND", Doc: "register-tiled unpack: columns per band", field: func(t *Tuning) any { return &t.JITRTUBand }},
	{Key: "jitrtutile", Pkg: "jit", Kind: Int, Default: "8", Min: 4, Max: 256, Old: "WEFT_JIT_RT_UTILE", Doc: "register-tiled unpack: rows per tile", field: func(t *Tuning) any { return &t.JITRTUTile }},
	{Key: "jitrtntmin", Pkg: "jit", Kind: Int, Default: "auto", Min: 0, Max: 1 << 62, Old: "WEFT_JIT_RT_NT_MIN", Doc: "register-tiled pack: non-temporal stores from this many bytes per call (default: twice the L2 size)", field: func(t *Tuning) any { return &t.JITRTNTMin }},
	{Key: "jitrtuntmin", Pkg: "jit", Kind: Int, Default: "auto", Min: 0, Max: 1 << 62, Old: "WEFT_JIT_RT_UNT_MIN", Doc: "register-tiled unpack: non-temporal stores from this many bytes per call (default: the last-level cache size)", field: func(t *Tuning) any { return &t.JITRTUNTMin }},
	{Key: "jitdualmap", Pkg: "jit", Kind: Bool, Default: "1", Old: "WEFT_JIT_DUAL_MAP", Doc: "W^X by two views (RW, RX) of one memfd, no system call per compile; 0: mprotect per compile, no writable alias of code ever", field: func(t *Tuning) any { return &t.JITDualMap }},

	{Key: "collbcast", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "binomial", "scatterallgather", "linear", "pipeline"}, Doc: "Bcast algorithm (auto: binomial, scatter + ring allgather from collbcastlarge on 3 ranks or more; pipeline: segments down a chain of the ranks)", field: func(t *Tuning) any { return &t.CollBcast }},
	{Key: "collreduce", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "binomial", "rsgather", "linear"}, Doc: "Reduce algorithm (auto: binomial, ring reduce-scatter + gather from collreducelarge)", field: func(t *Tuning) any { return &t.CollReduce }},
	{Key: "collallreduce", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "recdbl", "rabenseifner", "ring"}, Doc: "Allreduce algorithm (auto: recursive doubling, Rabenseifner from collallreducelarge)", field: func(t *Tuning) any { return &t.CollAllreduce }},
	{Key: "collgather", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "binomial", "linear"}, Doc: "Gather algorithm (auto: binomial, linear from collgatherlarge)", field: func(t *Tuning) any { return &t.CollGather }},
	{Key: "collscatter", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "binomial", "linear"}, Doc: "Scatter algorithm (auto: binomial, linear from collgatherlarge)", field: func(t *Tuning) any { return &t.CollScatter }},
	{Key: "collallgather", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "bruck", "ring", "recdbl"}, Doc: "Allgather algorithm (auto: recursive doubling on a power of two ranks, else Bruck; ring from collallgatherlarge)", field: func(t *Tuning) any { return &t.CollAllgather }},
	{Key: "collallgatherv", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "linear", "ring"}, Doc: "Allgatherv algorithm (auto: linear, ring from collallgatherlarge)", field: func(t *Tuning) any { return &t.CollAllgatherv }},
	{Key: "collalltoall", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "linear", "pairwise", "bruck"}, Doc: "Alltoall and Alltoallv algorithm (auto: linear, pairwise from collalltoalllarge, Bruck for blocks of up to 256 B on 8 ranks or more over several nodes; Alltoallv takes linear for bruck)", field: func(t *Tuning) any { return &t.CollAlltoall }},
	{Key: "collreducescatter", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "ring", "pairwise"}, Doc: "ReduceScatterBlock algorithm (auto: ring; pairwise, in rank order, for non-commutative operations and deterministic mode)", field: func(t *Tuning) any { return &t.CollReduceScatter }},
	{Key: "collscan", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "recdbl", "linear"}, Doc: "Scan and Exscan algorithm (auto: recursive doubling; a linear chain in deterministic mode)", field: func(t *Tuning) any { return &t.CollScan }},
	{Key: "collhier", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "on", "off"}, Doc: "combine the ranks of one process through its memory and the processes of one node through a node segment in Barrier, Bcast, Reduce, Allreduce, Allgather, Gather, Scatter (and Alltoall when all ranks share the process), one leader per node on the network (auto: where the collective's algorithm is auto; on: also under a forced algorithm, which then runs among the nodes' leaders)", field: func(t *Tuning) any { return &t.CollHier }},
	{Key: "collbcastlarge", Pkg: "collectives", Kind: Int, Default: "256K", Min: 0, Max: maxCount, Doc: "bytes from which Bcast scatters and allgathers", field: func(t *Tuning) any { return &t.CollBcastLarge }},
	{Key: "collreducelarge", Pkg: "collectives", Kind: Int, Default: "64K", Min: 0, Max: maxCount, Doc: "bytes from which Reduce reduce-scatters and gathers", field: func(t *Tuning) any { return &t.CollReduceLarge }},
	{Key: "collallreducelarge", Pkg: "collectives", Kind: Int, Default: "32K", Min: 0, Max: maxCount, Doc: "bytes from which Allreduce uses Rabenseifner's algorithm", field: func(t *Tuning) any { return &t.CollAllreduceLarge }},
	{Key: "collgatherlarge", Pkg: "collectives", Kind: Int, Default: "4K", Min: 0, Max: maxCount, Doc: "bytes per rank from which Gather and Scatter are linear", field: func(t *Tuning) any { return &t.CollGatherLarge }},
	{Key: "collallgatherlarge", Pkg: "collectives", Kind: Int, Default: "64K", Min: 0, Max: maxCount, Doc: "bytes of the whole result from which Allgather and Allgatherv use the ring", field: func(t *Tuning) any { return &t.CollAllgatherLarge }},
	{Key: "collalltoalllarge", Pkg: "collectives", Kind: Int, Default: "16K", Min: 0, Max: maxCount, Doc: "bytes per block from which Alltoall and Alltoallv exchange pairwise", field: func(t *Tuning) any { return &t.CollAlltoallLarge }},
	{Key: "collnodestream", Pkg: "collectives", Kind: Int, Default: "32K", Min: 0, Max: maxCount, Doc: "bytes per rank from which the node level (one node holding the communicator) streams Bcast, Allgather and Alltoall (more than two processes, or two of one rank each where they read each other's memory), Reduce (two processes) and Allreduce (up to three) through the node segment in pipelined chunks, each process reading straight from the writer's slot or, where the kernel allows, its buffer (two processes of one rank each read each other's buffers, or from this size if lower: Allgather and Alltoall from 8 KiB at every size, a Reduce rooted away from the node's leader from 8 KiB, Bcast and the other Reduces from 32 KiB, both up to 512 KiB)", field: func(t *Tuning) any { return &t.CollNodeStream }},
	{Key: "collstores", Pkg: "collectives", Kind: Enum, Default: "auto", Allowed: []string{"auto", "stream", "plain"}, Doc: "how the node level's copies of 8 KiB or more into memory other processes or handles read next are written: auto (each handle times its calls both ways, per collective and size, and keeps the faster, trying the other now and then), stream (non-temporal stores), plain (the cached copy); docs/collectives.md", field: func(t *Tuning) any { return &t.CollStores }},
}

// Defaults returns the tuning with every knob at its default.
func Defaults() *Tuning {
	t := &Tuning{}
	for i := range Knobs {
		if err := t.set1(&Knobs[i], Knobs[i].Default); err != nil {
			panic("settings: bad default of " + Knobs[i].Key) // a programming error in weft itself
		}
	}
	t.set = nil
	return t
}

var tuneOnce = sync.OnceValues(func() (*Tuning, error) { return ParseTune(os.Getenv(TuneEnv)) })

// Tune returns the tuning given by WEFT_TUNE, parsed once per process. On
// error it returns the defaults with the error, which every package's
// entry point reports.
func Tune() (*Tuning, error) { return tuneOnce() }

// ParseTune parses a WEFT_TUNE value: comma-separated key=value pairs.
// Knobs not named keep their defaults; an unknown key, a repeated key or a
// bad value is an *Error (the tuning returned is then Defaults()).
func ParseTune(s string) (*Tuning, error) {
	t := Defaults()
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		key, val, ok := strings.Cut(kv, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		k := knob(key)
		if !ok || k == nil {
			return Defaults(), &Error{Name: TuneEnv, Value: kv, Want: "key=value with a key from docs/tuning.md"}
		}
		for _, prev := range t.set {
			if prev == key {
				return Defaults(), &Error{Name: TuneEnv + " " + key, Value: val, Want: "each key once"}
			}
		}
		if err := t.set1(k, strings.TrimSpace(val)); err != nil {
			return Defaults(), err
		}
	}
	return t, nil
}

func knob(key string) *Knob {
	for i := range Knobs {
		if Knobs[i].Key == key {
			return &Knobs[i]
		}
	}
	return nil
}

func (t *Tuning) set1(k *Knob, v string) error {
	bad := &Error{Name: TuneEnv + " " + k.Key, Value: v, Want: k.Want()}
	switch p := k.field(t).(type) {
	case *int64:
		if v == "auto" && k.Default == "auto" {
			*p = Auto
			break
		}
		n, err := ParseInt(v)
		if err != nil || n < k.Min || n > k.Max {
			return bad
		}
		*p = n
	case *time.Duration:
		if v == "auto" && k.Default == "auto" {
			*p = Auto
			break
		}
		d, err := time.ParseDuration(v)
		if err != nil || int64(d) < k.Min || int64(d) > k.Max {
			return bad
		}
		*p = d
	case *bool:
		b, err := ParseBool(v)
		if err != nil {
			return bad
		}
		*p = b
	case *string:
		if v == "" && k.Default == "" {
			*p = ""
			break
		}
		w, err := parseEnum(v, k.Allowed)
		if err != nil {
			return bad
		}
		*p = w
	}
	t.set = append(t.set, k.Key)
	return nil
}

// format writes the value of k in t as WEFT_TUNE would.
func (t *Tuning) format(k *Knob) string {
	switch p := k.field(t).(type) {
	case *int64:
		if *p == Auto {
			return "auto"
		}
		return FormatInt(*p)
	case *time.Duration:
		if *p == Auto {
			return "auto"
		}
		return p.String()
	case *bool:
		if *p {
			return "1"
		}
		return "0"
	case *string:
		return *p
	}
	return ""
}

// Set returns a copy of t with the knob key set to value, as in WEFT_TUNE;
// tests use it to build per-object tunings.
func (t *Tuning) Set(key, value string) (*Tuning, error) {
	k := knob(key)
	if k == nil {
		return nil, &Error{Name: TuneEnv, Value: key, Want: "a key from docs/tuning.md"}
	}
	c := *t
	c.set = append([]string(nil), t.set...)
	if err := c.set1(k, value); err != nil {
		return nil, err
	}
	return &c, nil
}

// IsSet reports whether the knob key was given (in WEFT_TUNE, or by Set)
// rather than left at its default.
func (t *Tuning) IsSet(key string) bool { return slices.Contains(t.set, key) }

// String writes t as a WEFT_TUNE value of the knobs that were set.
func (t *Tuning) String() string {
	var b []string
	for _, key := range t.set {
		b = append(b, key+"="+t.format(knob(key)))
	}
	return strings.Join(b, ",")
}
