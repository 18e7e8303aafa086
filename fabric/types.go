package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"strconv"
	"strings"
)

// EPType is an endpoint type. The zero value is EPRDM.
type EPType int

// Endpoint types.
const (
	EPRDM   EPType = iota // reliable datagram (FI_EP_RDM), the default
	EPMsg                 // connected, reliable (FI_EP_MSG)
	EPDgram               // unreliable datagram (FI_EP_DGRAM)
)

func (t EPType) c() int64 {
	switch t {
	case EPMsg:
		return C.FI_EP_MSG
	case EPDgram:
		return C.FI_EP_DGRAM
	}
	return C.FI_EP_RDM
}

func epTypeFromC(v int64) EPType {
	switch v {
	case C.FI_EP_MSG:
		return EPMsg
	case C.FI_EP_DGRAM:
		return EPDgram
	}
	return EPRDM
}

// String names the value (or the set bits).
func (t EPType) String() string {
	switch t {
	case EPMsg:
		return "msg"
	case EPDgram:
		return "dgram"
	}
	return "rdm"
}

// Caps is a set of libfabric capability bits (FI_MSG, FI_TAGGED, ...).
type Caps uint64

// Capabilities.
const (
	CapMsg          Caps = C.FI_MSG
	CapTagged       Caps = C.FI_TAGGED
	CapRMA          Caps = C.FI_RMA
	CapAtomic       Caps = C.FI_ATOMIC
	CapRead         Caps = C.FI_READ
	CapWrite        Caps = C.FI_WRITE
	CapRecv         Caps = C.FI_RECV
	CapSend         Caps = C.FI_SEND
	CapRemoteRead   Caps = C.FI_REMOTE_READ
	CapRemoteWrite  Caps = C.FI_REMOTE_WRITE
	CapMultiRecv    Caps = C.FI_MULTI_RECV
	CapRMAEvent     Caps = C.FI_RMA_EVENT
	CapSource       Caps = C.FI_SOURCE
	CapDirectedRecv Caps = C.FI_DIRECTED_RECV
	CapFence        Caps = C.FI_FENCE
	CapLocalComm    Caps = C.FI_LOCAL_COMM
	CapRemoteComm   Caps = C.FI_REMOTE_COMM
	CapSharedAV     Caps = C.FI_SHARED_AV
	CapHMEM         Caps = C.FI_HMEM
	// CapRemoteCQData asks for remote CQ data (fi_senddata, fi_writedata).
	// libfabric treats FI_REMOTE_CQ_DATA as an operation flag, not a
	// capability: GetInfo strips it from the hints and instead keeps only
	// providers whose CQ data size is greater than zero.
	CapRemoteCQData Caps = C.FI_REMOTE_CQ_DATA
)

var capNames = []struct {
	c Caps
	n string
}{
	{CapMsg, "msg"}, {CapTagged, "tagged"}, {CapRMA, "rma"}, {CapAtomic, "atomic"},
	{CapRead, "read"}, {CapWrite, "write"}, {CapRecv, "recv"}, {CapSend, "send"},
	{CapRemoteRead, "remote_read"}, {CapRemoteWrite, "remote_write"},
	{CapMultiRecv, "multi_recv"}, {CapRMAEvent, "rma_event"}, {CapSource, "source"},
	{CapDirectedRecv, "directed_recv"}, {CapFence, "fence"}, {CapLocalComm, "local_comm"},
	{CapRemoteComm, "remote_comm"}, {CapSharedAV, "shared_av"}, {CapHMEM, "hmem"},
	{CapRemoteCQData, "remote_cq_data"},
}

// String names the value (or the set bits).
func (c Caps) String() string {
	var s []string
	for _, n := range capNames {
		if c&n.c != 0 {
			s = append(s, n.n)
			c &^= n.c
		}
	}
	if c != 0 {
		s = append(s, "0x"+strconv.FormatUint(uint64(c), 16))
	}
	return strings.Join(s, "|")
}

// Has reports whether every bit of want is in c.
func (c Caps) Has(want Caps) bool { return c&want == want }

// Threading is libfabric's threading model (FI_THREAD_*). Zero lets the
// provider choose.
type Threading int

// Threading models.
const (
	ThreadUnspec     Threading = C.FI_THREAD_UNSPEC
	ThreadSafe       Threading = C.FI_THREAD_SAFE
	ThreadDomain     Threading = C.FI_THREAD_DOMAIN
	ThreadCompletion Threading = C.FI_THREAD_COMPLETION
	ThreadEndpoint   Threading = C.FI_THREAD_ENDPOINT
)

// String names the value (or the set bits).
func (t Threading) String() string {
	switch t {
	case ThreadSafe:
		return "safe"
	case ThreadDomain:
		return "domain"
	case ThreadCompletion:
		return "completion"
	case ThreadEndpoint:
		return "endpoint"
	case ThreadUnspec:
		return "unspec"
	}
	return "thread(" + strconv.Itoa(int(t)) + ")"
}

// Progress is a progress model (FI_PROGRESS_*).
type Progress int

// Progress models. With ProgressManual the application drives progress by
// reading the completion queue (CQ.Read) or counters.
const (
	ProgressUnspec Progress = C.FI_PROGRESS_UNSPEC
	ProgressAuto   Progress = C.FI_PROGRESS_AUTO
	ProgressManual Progress = C.FI_PROGRESS_MANUAL
)

// String names the value (or the set bits).
func (p Progress) String() string {
	switch p {
	case ProgressAuto:
		return "auto"
	case ProgressManual:
		return "manual"
	}
	return "unspec"
}

// MRMode is a set of memory-registration mode bits (FI_MR_*).
type MRMode int

// Memory registration modes.
const (
	MRLocal     MRMode = C.FI_MR_LOCAL
	MRRaw       MRMode = C.FI_MR_RAW
	MRVirtAddr  MRMode = C.FI_MR_VIRT_ADDR
	MRAllocated MRMode = C.FI_MR_ALLOCATED
	MRProvKey   MRMode = C.FI_MR_PROV_KEY
	MREndpoint  MRMode = C.FI_MR_ENDPOINT
	MRHMEM      MRMode = C.FI_MR_HMEM
	// DefaultMRMode is what this package supports and asks for when
	// Hints.MRMode is zero.
	DefaultMRMode = MRLocal | MRVirtAddr | MRAllocated | MRProvKey
)

// String names the value (or the set bits).
func (m MRMode) String() string {
	names := []struct {
		m MRMode
		n string
	}{{MRLocal, "local"}, {MRRaw, "raw"}, {MRVirtAddr, "virt_addr"}, {MRAllocated, "allocated"},
		{MRProvKey, "prov_key"}, {MREndpoint, "endpoint"}, {MRHMEM, "hmem"}}
	var s []string
	for _, n := range names {
		if m&n.m != 0 {
			s = append(s, n.n)
			m &^= n.m
		}
	}
	if m != 0 {
		s = append(s, "0x"+strconv.FormatInt(int64(m), 16))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

// Order is a set of message-ordering bits (FI_ORDER_*).
type Order uint64

// Ordering bits. OrderWAW etc. cover all operation kinds; the OrderRMA* and
// OrderAtomic* bits (libfabric ≥ 1.15) name RMA- and atomic-only orderings.
const (
	OrderRAR       Order = C.FI_ORDER_RAR
	OrderRAW       Order = C.FI_ORDER_RAW
	OrderRAS       Order = C.FI_ORDER_RAS
	OrderWAR       Order = C.FI_ORDER_WAR
	OrderWAW       Order = C.FI_ORDER_WAW
	OrderWAS       Order = C.FI_ORDER_WAS
	OrderSAR       Order = C.FI_ORDER_SAR
	OrderSAW       Order = C.FI_ORDER_SAW
	OrderSAS       Order = C.FI_ORDER_SAS
	OrderStrict    Order = C.FI_ORDER_STRICT
	OrderRMARAR    Order = C.FI_ORDER_RMA_RAR
	OrderRMARAW    Order = C.FI_ORDER_RMA_RAW
	OrderRMAWAR    Order = C.FI_ORDER_RMA_WAR
	OrderRMAWAW    Order = C.FI_ORDER_RMA_WAW
	OrderAtomicRAR Order = C.FI_ORDER_ATOMIC_RAR
	OrderAtomicRAW Order = C.FI_ORDER_ATOMIC_RAW
	OrderAtomicWAR Order = C.FI_ORDER_ATOMIC_WAR
	OrderAtomicWAW Order = C.FI_ORDER_ATOMIC_WAW
)

// String names the value (or the set bits).
func (o Order) String() string {
	names := []struct {
		o Order
		n string
	}{{OrderRAR, "rar"}, {OrderRAW, "raw"}, {OrderRAS, "ras"}, {OrderWAR, "war"}, {OrderWAW, "waw"},
		{OrderWAS, "was"}, {OrderSAR, "sar"}, {OrderSAW, "saw"}, {OrderSAS, "sas"},
		{OrderRMARAR, "rma_rar"}, {OrderRMARAW, "rma_raw"}, {OrderRMAWAR, "rma_war"}, {OrderRMAWAW, "rma_waw"},
		{OrderAtomicRAR, "atomic_rar"}, {OrderAtomicRAW, "atomic_raw"}, {OrderAtomicWAR, "atomic_war"},
		{OrderAtomicWAW, "atomic_waw"}}
	var s []string
	for _, n := range names {
		if o&n.o != 0 {
			s = append(s, n.n)
			o &^= n.o
		}
	}
	if o != 0 {
		s = append(s, "0x"+strconv.FormatUint(uint64(o), 16))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

// Has reports whether every bit of want is in o.
func (o Order) Has(want Order) bool { return o&want == want }

// Access is a set of memory-region access bits.
type Access uint64

// Memory-region access rights.
const (
	AccessSend        Access = C.FI_SEND
	AccessRecv        Access = C.FI_RECV
	AccessRead        Access = C.FI_READ
	AccessWrite       Access = C.FI_WRITE
	AccessRemoteRead  Access = C.FI_REMOTE_READ
	AccessRemoteWrite Access = C.FI_REMOTE_WRITE
	// AccessAll is every right above.
	AccessAll = AccessSend | AccessRecv | AccessRead | AccessWrite | AccessRemoteRead | AccessRemoteWrite
)

// OpFlag is a per-operation flag for WriteMsg (FI_FENCE, ...).
type OpFlag uint64

// Operation flags.
const (
	OpFence            OpFlag = C.FI_FENCE
	OpDeliveryComplete OpFlag = C.FI_DELIVERY_COMPLETE
	OpTransmitComplete OpFlag = C.FI_TRANSMIT_COMPLETE
	OpInjectComplete   OpFlag = C.FI_INJECT_COMPLETE
	OpCompletion       OpFlag = C.FI_COMPLETION
	OpRemoteCQData     OpFlag = C.FI_REMOTE_CQ_DATA
	OpInject           OpFlag = C.FI_INJECT
)

// Completion flags reported in Completion.Flags and CQError.Flags.
const (
	CompSend         uint64 = C.FI_SEND
	CompRecv         uint64 = C.FI_RECV
	CompMsg          uint64 = C.FI_MSG
	CompTagged       uint64 = C.FI_TAGGED
	CompRMA          uint64 = C.FI_RMA
	CompAtomic       uint64 = C.FI_ATOMIC
	CompRead         uint64 = C.FI_READ
	CompWrite        uint64 = C.FI_WRITE
	CompRemoteRead   uint64 = C.FI_REMOTE_READ
	CompRemoteWrite  uint64 = C.FI_REMOTE_WRITE
	CompRemoteCQData uint64 = C.FI_REMOTE_CQ_DATA
	CompMultiRecv    uint64 = C.FI_MULTI_RECV
)

// Addr is a fabric address handle (fi_addr_t), an index into an AV.
type Addr uint64

// AddrUnspec means "any source" for receives.
const AddrUnspec Addr = Addr(^uint64(0))

// Desc is an opaque local memory descriptor (fi_mr_desc) for operations on
// registered memory. Its zero value is valid where the provider needs no
// descriptor (MRLocal not granted). It holds a C pointer owned by the
// provider, never a Go pointer.
type Desc uintptr

// Datatype is an atomic datatype (FI_UINT64, ...).
type Datatype int

// Atomic datatypes.
const (
	Int8       Datatype = C.FI_INT8
	Uint8      Datatype = C.FI_UINT8
	Int16      Datatype = C.FI_INT16
	Uint16     Datatype = C.FI_UINT16
	Int32      Datatype = C.FI_INT32
	Uint32     Datatype = C.FI_UINT32
	Int64      Datatype = C.FI_INT64
	Uint64     Datatype = C.FI_UINT64
	Float32    Datatype = C.FI_FLOAT
	Float64    Datatype = C.FI_DOUBLE
	Complex64  Datatype = C.FI_FLOAT_COMPLEX
	Complex128 Datatype = C.FI_DOUBLE_COMPLEX
)

// Size is the size in bytes of one element, or 0 for an unknown type.
func (d Datatype) Size() int {
	switch d {
	case Int8, Uint8:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64, Complex64:
		return 8
	case Complex128:
		return 16
	}
	return 0
}

// AtomicOp is an atomic operation (FI_SUM, ...).
type AtomicOp int

// Atomic operations. OpRead is a fetch-only operation; OpCswap and the other
// compare operations need CompareAtomic.
const (
	OpMin     AtomicOp = C.FI_MIN
	OpMax     AtomicOp = C.FI_MAX
	OpSum     AtomicOp = C.FI_SUM
	OpProd    AtomicOp = C.FI_PROD
	OpLor     AtomicOp = C.FI_LOR
	OpLand    AtomicOp = C.FI_LAND
	OpBor     AtomicOp = C.FI_BOR
	OpBand    AtomicOp = C.FI_BAND
	OpLxor    AtomicOp = C.FI_LXOR
	OpBxor    AtomicOp = C.FI_BXOR
	OpRead    AtomicOp = C.FI_ATOMIC_READ
	OpWrite   AtomicOp = C.FI_ATOMIC_WRITE
	OpCswap   AtomicOp = C.FI_CSWAP
	OpCswapNe AtomicOp = C.FI_CSWAP_NE
	OpCswapLe AtomicOp = C.FI_CSWAP_LE
	OpCswapLt AtomicOp = C.FI_CSWAP_LT
	OpCswapGe AtomicOp = C.FI_CSWAP_GE
	OpCswapGt AtomicOp = C.FI_CSWAP_GT
	OpMswap   AtomicOp = C.FI_MSWAP
)
