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
}
*/
import "C"

import "unsafe"

// cLayouts returns sizes and offsets of the C structs that Go types mirror
// (Completion, cqErrRaw, infoFacts), for the layout test.
func cLayouts() [9]uintptr {
	var out [9]C.size_t
	C.weft_layouts(&out[0])
	var r [9]uintptr
	for i, v := range out {
		r[i] = uintptr(v)
	}
	return r
}

// goLayouts returns the same facts for the Go mirrors.
func goLayouts() [9]uintptr {
	var c Completion
	var e cqErrRaw
	var f infoFacts
	return [9]uintptr{
		unsafe.Sizeof(c), unsafe.Offsetof(c.Len), unsafe.Offsetof(c.Tag),
		unsafe.Sizeof(e), unsafe.Offsetof(e.Err), unsafe.Offsetof(e.Text),
		unsafe.Sizeof(f), unsafe.Offsetof(f.InjectSize), unsafe.Offsetof(f.AddrFormat),
	}
}
