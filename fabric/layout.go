package fabric

/*
#include <stddef.h>
#include "shim.h"

static void weft_layouts(size_t *out) {
	out[0] = sizeof(struct weft_comp);
	out[1] = offsetof(struct weft_comp, len);
	out[2] = offsetof(struct weft_comp, tag);
	out[3] = sizeof(struct weft_cqerr);
	out[4] = offsetof(struct weft_cqerr, err);
	out[5] = offsetof(struct weft_cqerr, text);
	out[6] = sizeof(struct weft_info_facts);
	out[7] = offsetof(struct weft_info_facts, inject_size);
	out[8] = offsetof(struct weft_info_facts, addr_format);
	out[9] = sizeof(struct weft_op);
	out[10] = offsetof(struct weft_op, buf);
	out[11] = offsetof(struct weft_op, ctx);
	out[12] = WEFT_OP_WRITEMSG;
	out[13] = WEFT_OP_INJECTWRITEDATA;
	out[14] = WEFT_SIG_MAX_SLOT_BITS;
}
*/
import "C"

import "unsafe"

// cLayouts returns sizes and offsets of the C structs that Go types mirror
// (Completion, cqErrRaw, infoFacts, Op), the C numbers of two op kinds and
// the signal encoding's slot-bit limit, for the layout test.
func cLayouts() [15]uintptr {
	var out [15]C.size_t
	C.weft_layouts(&out[0])
	var r [15]uintptr
	for i, v := range out {
		r[i] = uintptr(v)
	}
	return r
}

// goLayouts returns the same facts for the Go mirrors.
func goLayouts() [15]uintptr {
	var c Completion
	var e cqErrRaw
	var f infoFacts
	var o Op
	return [15]uintptr{
		unsafe.Sizeof(c), unsafe.Offsetof(c.Len), unsafe.Offsetof(c.Tag),
		unsafe.Sizeof(e), unsafe.Offsetof(e.Err), unsafe.Offsetof(e.Text),
		unsafe.Sizeof(f), unsafe.Offsetof(f.InjectSize), unsafe.Offsetof(f.AddrFormat),
		unsafe.Sizeof(o), unsafe.Offsetof(o.Buf), unsafe.Offsetof(o.Ctx),
		uintptr(OpKindWriteMsg), uintptr(OpKindInjectWriteData), MaxSignalSlotBits,
	}
}
