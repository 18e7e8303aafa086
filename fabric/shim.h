// C shims between weft's fabric package and libfabric. Every function takes
// plain integers (fid handles as uintptr_t, contexts as integers) and raw
// buffer pointers that are valid only for the duration of the call unless the
// caller has pinned them or they live outside the Go heap. No function here
// stores a Go pointer.
#ifndef WEFT_FABRIC_SHIM_H
#define WEFT_FABRIC_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>

// weft_comp has the layout of the Go type Completion.
struct weft_comp {
	uint64_t ctx;
	uint64_t flags;
	uint64_t len;
	uint64_t data;
	uint64_t tag;
};

// weft_cqerr has the layout of the Go type cqErrRaw.
struct weft_cqerr {
	uint64_t ctx;
	uint64_t flags;
	uint64_t len;
	uint64_t olen;
	uint64_t data;
	uint64_t tag;
	int64_t err;
	int64_t prov_errno;
	char text[256];
};

// weft_hints carries the Go Hints into weft_getinfo.
#define WEFT_ADDR_STR FI_ADDR_STR

struct weft_hints {
	uint64_t caps;
	uint64_t mode;
	uint64_t msg_order;
	uint64_t op_flags;
	int64_t ep_type;
	int64_t threading;
	int64_t mr_mode;
	int64_t progress;
};

// libfabric is not linked: dl.c opens it on first use (dl.go) and resolves
// the few functions of the library itself that the shims call. Everything
// else (fi_domain, fi_send, fi_cq_read, ...) is an inline call through the
// ops tables of objects those functions return. Each pointer has the type
// of the declaration in libfabric's headers.
struct weft_fi_fns {
	__typeof__(fi_getinfo) *getinfo;
	__typeof__(fi_freeinfo) *freeinfo;
	__typeof__(fi_dupinfo) *dupinfo;
	__typeof__(fi_fabric) *fabric;
	__typeof__(fi_strerror) *strerror;
};
extern struct weft_fi_fns weft_fi;
int weft_dl_load(const char *name, int quiet_ipath);
const char *weft_dl_error(void);
int weft_dl_loaded(void);
uint64_t weft_dl_loads(void);

// Signal dispositions around libfabric (sigaction.c, sigaction.go).
void weft_sig_load_begin(void);
void weft_sig_load_end(void);
int weft_sig_load_restored(int sig);
int weft_sig_in_self(int sig);
void weft_sig_guard_begin(void);
void weft_sig_guard_end(void);
uint64_t weft_sig_grabbed_now(void);
uint64_t weft_sig_restored(void);
int weft_sig_guard_selftest(int sig);

int weft_getinfo(const char *prov, const struct weft_hints *h, uintptr_t *out);
uintptr_t weft_info_next(uintptr_t info);
uintptr_t weft_dupinfo(uintptr_t info);
void weft_freeinfo(uintptr_t info);

// weft_info_facts has the layout of the Go type infoFacts.
struct weft_info_facts {
	uint64_t caps;
	uint64_t mode;
	uint64_t msg_order;
	uint64_t comp_order;
	uint64_t tx_op_flags;
	uint64_t rx_op_flags;
	int64_t ep_type;
	int64_t threading;
	int64_t data_progress;
	int64_t control_progress;
	int64_t mr_mode;
	uint64_t inject_size;
	uint64_t max_msg_size;
	int64_t cq_data_size;
	int64_t tx_size;
	int64_t rx_size;
	int64_t max_order_raw;
	int64_t max_order_war;
	int64_t max_order_waw;
	int64_t mr_key_size;
	int64_t iov_limit;
	int64_t rma_iov_limit;
	int64_t addrlen;
	int64_t max_ep_tx_ctx;
	int64_t ep_cnt;
	int64_t av_type;
	int64_t mem_tag_format;
	int64_t prov_version;
	int64_t addr_format;
};
void weft_info_get(uintptr_t info, struct weft_info_facts *f);
const char *weft_info_prov(uintptr_t info);
const char *weft_info_fabric(uintptr_t info);
const char *weft_info_domain(uintptr_t info);

int weft_fabric_open(uintptr_t info, uintptr_t *out);
int weft_domain_open(uintptr_t fabric, uintptr_t info, uintptr_t *out);
int weft_close(uintptr_t fid);
int weft_cq_open(uintptr_t domain, size_t size, uintptr_t *out);
int weft_av_open(uintptr_t domain, size_t count, uintptr_t *out);
int weft_cntr_open(uintptr_t domain, uintptr_t *out);
int weft_ep_open(uintptr_t domain, uintptr_t info, uintptr_t *out);
int weft_ep_bind(uintptr_t ep, uintptr_t fid, uint64_t flags);
int weft_ep_enable(uintptr_t ep);
int weft_ep_getname(uintptr_t ep, void *buf, size_t *len);

int weft_av_insert(uintptr_t av, const void *addrs, size_t count, uint64_t *out);
int weft_av_lookup(uintptr_t av, uint64_t addr, void *buf, size_t *len);
int weft_av_remove(uintptr_t av, uint64_t *addrs, size_t count);

int weft_mr_regattr_hmem(uintptr_t domain, uint64_t addr, size_t len, uint64_t access, uint64_t key,
		int iface, uint64_t device, uintptr_t *out, uint64_t *outkey, uintptr_t *outdesc);
int weft_mr_reg(uintptr_t domain, uintptr_t buf, size_t len, uint64_t access,
		uint64_t key, uintptr_t *out, uint64_t *outkey, uintptr_t *outdesc);

// The pace argument of the spinning loops (weft_cq_read, weft_post_read,
// weft_cq_wait_word, weft_cq_signals, weft_cntr_spin) is how many
// CLOCK_MONOTONIC reads they make after an empty poll before the next one;
// 0 polls back to back. Each CQ and counter carries its own (pace.go).
ssize_t weft_cq_read(uintptr_t cq, struct weft_comp *out, size_t count, int spins, int pace);
void weft_pace_rounds(int rounds, int pace);
ssize_t weft_cq_readerr(uintptr_t cq, struct weft_cqerr *err);

uint64_t weft_cntr_read(uintptr_t cntr);
uint64_t weft_cntr_readerr(uintptr_t cntr);
int weft_cntr_add(uintptr_t cntr, uint64_t v);
int weft_cntr_set(uintptr_t cntr, uint64_t v);
uint64_t weft_cntr_spin(uintptr_t cntr, uint64_t threshold, int spins, int pace);

ssize_t weft_send(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t ctx);
ssize_t weft_senddata(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t ctx);
// weft_senddata_at sends from an address that is not Go's (device memory).
static inline ssize_t weft_senddata_at(uintptr_t ep, uint64_t addr, size_t len, uintptr_t desc, uint64_t data,
		uint64_t dest, uint64_t ctx) {
	return weft_senddata(ep, (void *)(uintptr_t)addr, len, desc, data, dest, ctx);
}
ssize_t weft_recv(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t src, uint64_t ctx);
ssize_t weft_inject(uintptr_t ep, void *buf, size_t len, uint64_t dest);
ssize_t weft_injectdata(uintptr_t ep, void *buf, size_t len, uint64_t data, uint64_t dest);
ssize_t weft_tsend(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t tag, uint64_t ctx);
ssize_t weft_tsenddata(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t tag, uint64_t ctx);
ssize_t weft_tinject(uintptr_t ep, void *buf, size_t len, uint64_t dest, uint64_t tag);
ssize_t weft_tinjectdata(uintptr_t ep, void *buf, size_t len, uint64_t data, uint64_t dest, uint64_t tag);
ssize_t weft_trecv(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t src, uint64_t tag, uint64_t ignore, uint64_t ctx);
ssize_t weft_write(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx);
ssize_t weft_writedata(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx);
ssize_t weft_writemsg(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx, uint64_t flags);
ssize_t weft_inject_write(uintptr_t ep, void *buf, size_t len, uint64_t dest, uint64_t raddr, uint64_t key);
ssize_t weft_inject_writedata(uintptr_t ep, void *buf, size_t len, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t key);
ssize_t weft_read(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t src, uint64_t raddr, uint64_t key, uint64_t ctx);
ssize_t weft_atomic(uintptr_t ep, void *buf, size_t count, uintptr_t desc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx);
ssize_t weft_fetch_atomic(uintptr_t ep, void *buf, size_t count, uintptr_t desc, void *res, uintptr_t rdesc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx);
ssize_t weft_compare_atomic(uintptr_t ep, void *buf, size_t count, uintptr_t desc, void *cmp, uintptr_t cdesc, void *res, uintptr_t rdesc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx);
ssize_t weft_atomicmsg(uintptr_t ep, void *buf, size_t count, uintptr_t desc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx, uint64_t flags);
ssize_t weft_inject_atomic(uintptr_t ep, void *buf, size_t count, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op);
int weft_atomicvalid(uintptr_t ep, int kind, int dt, int op, size_t *count);
// Vectored operations: segs holds n (base, len, desc) triples.
#define WEFT_MAX_IOV 8
ssize_t weft_sendv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t dest, uint64_t ctx);
ssize_t weft_recvv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t src, uint64_t ctx);
ssize_t weft_tsendv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t dest, uint64_t tag, uint64_t ctx);
ssize_t weft_trecvv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t src, uint64_t tag, uint64_t ignore, uint64_t ctx);
ssize_t weft_writev(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx);
ssize_t weft_readv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t src, uint64_t raddr, uint64_t key, uint64_t ctx);
ssize_t weft_cancel(uintptr_t ep, uint64_t ctx);

// Batched posting (batch.go). struct weft_op has the layout of the Go type
// Op: twelve 64-bit words. buf is C/mmap memory or Go memory the caller
// pinned; the array itself is read only during the call.
struct weft_op {
	uint64_t kind;
	uint64_t flags;
	void *buf;
	uint64_t len;
	uint64_t desc;
	uint64_t addr;
	uint64_t tag;
	uint64_t ignore;
	uint64_t data;
	uint64_t raddr;
	uint64_t key;
	uint64_t ctx;
};
// Op kinds; they equal the Go OpKind constants.
enum {
	WEFT_OP_RECV = 1,
	WEFT_OP_SEND,
	WEFT_OP_SENDDATA,
	WEFT_OP_INJECT,
	WEFT_OP_INJECTDATA,
	WEFT_OP_TRECV,
	WEFT_OP_TSEND,
	WEFT_OP_TSENDDATA,
	WEFT_OP_TINJECT,
	WEFT_OP_TINJECTDATA,
	WEFT_OP_WRITE,
	WEFT_OP_WRITEDATA,
	WEFT_OP_INJECTWRITE,
	WEFT_OP_READ,
	WEFT_OP_WRITEMSG,
	WEFT_OP_INJECTWRITEDATA,
};
// weft_post_batch posts ops[0..n) in order and stops at the first failure.
// It returns n when every op was posted, else -((i << 32) | -ret) for the
// failing op i and its (negative) libfabric code ret.
int64_t weft_post_batch(uintptr_t ep, const struct weft_op *ops, size_t n);
// weft_post_read posts like weft_post_batch and then reads cq like
// weft_cq_read(cq, out, count, spins). When every op was posted, or when
// op i failed with -FI_EAGAIN, it returns (again << 62) | (posted << 32) |
// completions read (an error entry at the head of the queue is left there
// in the EAGAIN case). Otherwise it returns -((i << 32) | code): i < n for
// a failed post (the CQ is not read), i == n for a failed CQ read
// (-FI_EAVAIL: read the error entry).
int64_t weft_post_read(uintptr_t ep, const struct weft_op *ops, size_t n,
		uintptr_t cq, struct weft_comp *out, size_t count, int spins, int pace);
// weft_cq_wait_word spins at most spins times: it returns (1 << 32) | n as
// soon as *word >= want, else reads cq (driving progress) and returns n
// when it yielded n > 0 completions; 0 when spins ran out; a negative
// libfabric code when the read failed (-FI_EAVAIL: read the error entry).
int64_t weft_cq_wait_word(uintptr_t cq, const volatile uint64_t *word, uint64_t want,
		struct weft_comp *out, size_t count, int spins, int pace);

// Signals in remote CQ data (signal.go). weft_sig_apply stores the valid
// signals among c[0..n) into mem (nslots 8-byte words; stage holds two
// words per origin for signals sent in parts), counts them in *applied,
// and compacts the other entries to the front; it returns how many are
// left. weft_cq_signals is weft_cq_wait_word (word != NULL) or
// weft_cq_read (word == NULL; it also returns once a signal was applied)
// where every read of cq is drained: reads repeat until one returns fewer
// entries than asked for or out is full, and signals are applied as they
// are read, never returned in out. mem, stage and applied are read and
// written only during the call.
#define WEFT_SIG_MAX_SLOT_BITS 40
#define WEFT_SIG_MAX_READS 256
size_t weft_sig_apply(struct weft_comp *c, size_t n, uint64_t *mem, uint64_t nslots, int slot_bits,
		uint64_t *stage, uint64_t norigins, uint64_t *applied);
int64_t weft_cq_signals(uintptr_t cq, uint64_t *mem, uint64_t nslots, int slot_bits,
		uint64_t *stage, uint64_t norigins, uint64_t *applied,
		const volatile uint64_t *word, uint64_t want,
		struct weft_comp *out, size_t count, int spins, int pace);

const char *weft_strerror(int err);

// Fast calls (fastcall.go): the hot polling and posting shims called through
// internal/ccall on a C stack owned by the CQ or endpoint, with every
// argument in one block. kind selects the shim; fields a shim does not take
// are ignored. weft_fast_call returns the shim's result; weft_cq_signals'
// applied count comes back in the block.
#define WEFT_FAST_POST_BATCH 1
#define WEFT_FAST_POST_READ 2
#define WEFT_FAST_CQ_READ 3
#define WEFT_FAST_CQ_WAIT_WORD 4
#define WEFT_FAST_CQ_SIGNALS 5
#define WEFT_FAST_POST_ONE 6
// Pointers travel as integers (the comment names their type): the block
// lives with the C stack in Go memory and is reused call after call, and
// integer fields let Go keep the pointed-to values (a stack Op, a caller's
// []Completion) where they are.
struct weft_fast {
	int64_t kind;
	uintptr_t ep;
	uintptr_t cq;
	uintptr_t ops; /* const struct weft_op * */
	uint64_t n;
	uintptr_t out; /* struct weft_comp * */
	uint64_t count;
	int64_t spins;
	uintptr_t word; /* const volatile uint64_t * */
	uint64_t want;
	uintptr_t mem; /* uint64_t * */
	uint64_t nslots;
	int64_t slot_bits;
	uintptr_t stage; /* uint64_t * */
	uint64_t norigins;
	uint64_t applied;
	int64_t pace; /* set once when the stack is made: the owner's poll pace */
};
int64_t weft_fast_call(struct weft_fast *a);
uintptr_t weft_fast_fn(void);
// weft_stack_alloc maps size bytes (a multiple of the page size) for a C
// stack with its lowest page inaccessible; 0 on failure.
uintptr_t weft_stack_alloc(size_t size);
void weft_stack_free(uintptr_t base, size_t size);
#endif
