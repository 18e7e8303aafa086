// C side of weft's fabric package: see shim.h. Each exported Go operation
// makes exactly one call into one of these functions.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"

#define EP(x) ((struct fid_ep *)(x))
#define VOIDP(x) ((void *)(uintptr_t)(x))

// The shims that call libfabric's own functions (weft_fi) return
// -FI_ENOSYS before the library is loaded; Go loads it before any of them
// can be reached (dl.go).

int weft_getinfo(const char *prov, const struct weft_hints *h, uintptr_t *out) {
	struct fi_info *hints;
	struct fi_info *info = NULL;
	int ret;
	if (!weft_dl_loaded())
		return -FI_ENOSYS;
	hints = weft_fi.dupinfo(NULL); /* fi_allocinfo */
	if (!hints)
		return -FI_ENOMEM;
	if (prov && prov[0])
		hints->fabric_attr->prov_name = strdup(prov);
	hints->caps = h->caps;
	hints->mode = h->mode;
	hints->ep_attr->type = (enum fi_ep_type)h->ep_type;
	hints->domain_attr->threading = (enum fi_threading)h->threading;
	hints->domain_attr->mr_mode = (int)h->mr_mode;
	hints->domain_attr->av_type = FI_AV_TABLE;
	hints->domain_attr->data_progress = (enum fi_progress)h->progress;
	hints->tx_attr->msg_order = h->msg_order;
	hints->rx_attr->msg_order = h->msg_order;
	hints->tx_attr->op_flags = h->op_flags;
	weft_sig_guard_begin();
	ret = weft_fi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &info);
	weft_sig_guard_end();
	weft_fi.freeinfo(hints);
	if (ret)
		return ret;
	*out = (uintptr_t)info;
	return 0;
}

uintptr_t weft_info_next(uintptr_t info) { return (uintptr_t)((struct fi_info *)info)->next; }

uintptr_t weft_dupinfo(uintptr_t info) {
	struct fi_info *src = (struct fi_info *)info;
	struct fi_info *next = src->next;
	struct fi_info *dup;
	if (!weft_dl_loaded())
		return 0;
	src->next = NULL;
	dup = weft_fi.dupinfo(src);
	src->next = next;
	return (uintptr_t)dup;
}

void weft_freeinfo(uintptr_t info) {
	if (weft_dl_loaded())
		weft_fi.freeinfo((struct fi_info *)info);
}

void weft_info_get(uintptr_t p, struct weft_info_facts *f) {
	struct fi_info *i = (struct fi_info *)p;
	memset(f, 0, sizeof(*f));
	f->caps = i->caps;
	f->mode = i->mode;
	if (i->tx_attr) {
		f->msg_order = i->tx_attr->msg_order;
		f->comp_order = i->tx_attr->comp_order;
		f->tx_op_flags = i->tx_attr->op_flags;
		f->inject_size = i->tx_attr->inject_size;
		f->tx_size = (int64_t)i->tx_attr->size;
		f->iov_limit = (int64_t)i->tx_attr->iov_limit;
		f->rma_iov_limit = (int64_t)i->tx_attr->rma_iov_limit;
	}
	if (i->rx_attr) {
		f->rx_op_flags = i->rx_attr->op_flags;
		f->rx_size = (int64_t)i->rx_attr->size;
	}
	if (i->ep_attr) {
		f->ep_type = i->ep_attr->type;
		f->max_msg_size = i->ep_attr->max_msg_size > (size_t)INT64_MAX ? (uint64_t)INT64_MAX : i->ep_attr->max_msg_size;
		f->max_order_raw = (int64_t)i->ep_attr->max_order_raw_size;
		f->max_order_war = (int64_t)i->ep_attr->max_order_war_size;
		f->max_order_waw = (int64_t)i->ep_attr->max_order_waw_size;
		f->mem_tag_format = (int64_t)i->ep_attr->mem_tag_format;
	}
	if (i->domain_attr) {
		f->threading = i->domain_attr->threading;
		f->data_progress = i->domain_attr->data_progress;
		f->control_progress = i->domain_attr->control_progress;
		f->mr_mode = i->domain_attr->mr_mode;
		f->cq_data_size = (int64_t)i->domain_attr->cq_data_size;
		f->mr_key_size = (int64_t)i->domain_attr->mr_key_size;
		f->max_ep_tx_ctx = (int64_t)i->domain_attr->max_ep_tx_ctx;
		f->ep_cnt = (int64_t)i->domain_attr->ep_cnt;
		f->av_type = i->domain_attr->av_type;
	}
	if (i->fabric_attr)
		f->prov_version = i->fabric_attr->prov_version;
	f->addrlen = (int64_t)i->src_addrlen;
	f->addr_format = (int64_t)i->addr_format;
}

const char *weft_info_prov(uintptr_t p) {
	struct fi_info *i = (struct fi_info *)p;
	return (i->fabric_attr && i->fabric_attr->prov_name) ? i->fabric_attr->prov_name : "";
}
const char *weft_info_fabric(uintptr_t p) {
	struct fi_info *i = (struct fi_info *)p;
	return (i->fabric_attr && i->fabric_attr->name) ? i->fabric_attr->name : "";
}
const char *weft_info_domain(uintptr_t p) {
	struct fi_info *i = (struct fi_info *)p;
	return (i->domain_attr && i->domain_attr->name) ? i->domain_attr->name : "";
}

int weft_fabric_open(uintptr_t info, uintptr_t *out) {
	struct fid_fabric *f = NULL;
	int ret;
	if (!weft_dl_loaded())
		return -FI_ENOSYS;
	weft_sig_guard_begin();
	ret = weft_fi.fabric(((struct fi_info *)info)->fabric_attr, &f, NULL);
	weft_sig_guard_end();
	*out = (uintptr_t)f;
	return ret;
}

int weft_domain_open(uintptr_t fabric, uintptr_t info, uintptr_t *out) {
	struct fid_domain *d = NULL;
	int ret;
	weft_sig_guard_begin();
	ret = fi_domain((struct fid_fabric *)fabric, (struct fi_info *)info, &d, NULL);
	weft_sig_guard_end();
	*out = (uintptr_t)d;
	return ret;
}

int weft_close(uintptr_t fid) { return fi_close((struct fid *)fid); }

int weft_cq_open(uintptr_t domain, size_t size, uintptr_t *out) {
	struct fi_cq_attr attr;
	struct fid_cq *cq = NULL;
	int ret;
	memset(&attr, 0, sizeof(attr));
	attr.size = size;
	attr.format = FI_CQ_FORMAT_TAGGED;
	attr.wait_obj = FI_WAIT_NONE;
	ret = fi_cq_open((struct fid_domain *)domain, &attr, &cq, NULL);
	*out = (uintptr_t)cq;
	return ret;
}

int weft_av_open(uintptr_t domain, size_t count, uintptr_t *out) {
	struct fi_av_attr attr;
	struct fid_av *av = NULL;
	int ret;
	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_TABLE;
	attr.count = count;
	ret = fi_av_open((struct fid_domain *)domain, &attr, &av, NULL);
	*out = (uintptr_t)av;
	return ret;
}

int weft_cntr_open(uintptr_t domain, uintptr_t *out) {
	struct fi_cntr_attr attr;
	struct fid_cntr *c = NULL;
	int ret;
	memset(&attr, 0, sizeof(attr));
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.wait_obj = FI_WAIT_NONE;
	ret = fi_cntr_open((struct fid_domain *)domain, &attr, &c, NULL);
	*out = (uintptr_t)c;
	return ret;
}

int weft_ep_open(uintptr_t domain, uintptr_t info, uintptr_t *out) {
	struct fid_ep *ep = NULL;
	int ret = fi_endpoint((struct fid_domain *)domain, (struct fi_info *)info, &ep, NULL);
	*out = (uintptr_t)ep;
	return ret;
}

int weft_ep_bind(uintptr_t ep, uintptr_t fid, uint64_t flags) {
	return fi_ep_bind(EP(ep), (struct fid *)fid, flags);
}

int weft_ep_enable(uintptr_t ep) { return fi_enable(EP(ep)); }

int weft_ep_getname(uintptr_t ep, void *buf, size_t *len) {
	return fi_getname(&EP(ep)->fid, buf, len);
}

int weft_av_insert(uintptr_t av, const void *addrs, size_t count, uint64_t *out) {
	return fi_av_insert((struct fid_av *)av, addrs, count, (fi_addr_t *)out, 0, NULL);
}

int weft_av_lookup(uintptr_t av, uint64_t addr, void *buf, size_t *len) {
	return fi_av_lookup((struct fid_av *)av, (fi_addr_t)addr, buf, len);
}

int weft_av_remove(uintptr_t av, uint64_t *addrs, size_t count) {
	return fi_av_remove((struct fid_av *)av, (fi_addr_t *)addrs, count, 0);
}

int weft_mr_reg(uintptr_t domain, uintptr_t buf, size_t len, uint64_t access,
		uint64_t key, uintptr_t *out, uint64_t *outkey, uintptr_t *outdesc) {
	struct fid_mr *mr = NULL;
	int ret = fi_mr_reg((struct fid_domain *)domain, VOIDP(buf), len, access, 0, key, 0, &mr, NULL);
	if (ret)
		return ret;
	*out = (uintptr_t)mr;
	*outkey = fi_mr_key(mr);
	*outdesc = (uintptr_t)fi_mr_desc(mr);
	return 0;
}

/* weft_mr_regattr_hmem registers device memory (FI_HMEM): fi_mr_regattr
 * with the memory's interface (FI_HMEM_CUDA, ...) and device number. */
int weft_mr_regattr_hmem(uintptr_t domain, uint64_t addr, size_t len, uint64_t access, uint64_t key,
		int iface, uint64_t device, uintptr_t *out, uint64_t *outkey, uintptr_t *outdesc) {
	struct fid_mr *mr = NULL;
	struct iovec iov = {VOIDP((uintptr_t)addr), len};
	struct fi_mr_attr attr;
	memset(&attr, 0, sizeof attr);
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = access;
	attr.requested_key = key;
	attr.iface = (enum fi_hmem_iface)iface;
	attr.device.reserved = device; /* the union's widest member: cuda, ze, neuron ids */
	if (iface == FI_HMEM_CUDA)
		attr.device.cuda = (int)device;
	int ret = fi_mr_regattr((struct fid_domain *)domain, &attr, 0, &mr);
	if (ret)
		return ret;
	*out = (uintptr_t)mr;
	*outkey = fi_mr_key(mr);
	*outdesc = (uintptr_t)fi_mr_desc(mr);
	return 0;
}

/* poll_pace runs between two polls of a spinning loop that found nothing:
 * pace reads of the monotonic clock (a vDSO call of ~20 ns on
 * x86-64). A loop that polls back to back takes the provider's locks and
 * touches its shared-memory queues as fast as it can, which measured slower
 * when the peer delivering the awaited message runs on a nearby core (see
 * pace.go). Returns 1 so it can end a loop condition. */
static inline int poll_pace(int pace) {
	struct timespec ts;
	int k;
	for (k = pace; k > 0; k--)
		clock_gettime(CLOCK_MONOTONIC, &ts);
	return 1;
}

/* weft_pace_rounds runs poll_pace rounds times: what a spinning loop adds
 * to rounds empty polls, without the polls (its cost is measured by the
 * tests of pace.go). */
void weft_pace_rounds(int rounds, int pace) {
	for (; rounds > 0; rounds--)
		poll_pace(pace);
}

/* read_once is one fi_cq_read of at most count (<= 64) entries into out. */
static inline ssize_t read_once(struct fid_cq *cq, struct weft_comp *out, size_t count) {
	struct fi_cq_tagged_entry ent[64];
	ssize_t n;
	size_t i;
	n = fi_cq_read(cq, ent, count);
	for (i = 0; n > 0 && i < (size_t)n; i++) {
		out[i].ctx = (uint64_t)(uintptr_t)ent[i].op_context;
		out[i].flags = ent[i].flags;
		out[i].len = ent[i].len;
		out[i].data = ent[i].data;
		out[i].tag = ent[i].tag;
	}
	return n;
}

ssize_t weft_cq_read(uintptr_t cqp, struct weft_comp *out, size_t count, int spins, int pace) {
	struct fid_cq *cq = (struct fid_cq *)cqp;
	ssize_t n;
	if (count > 64)
		count = 64;
	do {
		n = read_once(cq, out, count);
	} while (n == -FI_EAGAIN && --spins > 0 && poll_pace(pace));
	return n;
}

ssize_t weft_cq_readerr(uintptr_t cqp, struct weft_cqerr *err) {
	struct fid_cq *cq = (struct fid_cq *)cqp;
	struct fi_cq_err_entry e;
	const char *s;
	ssize_t n;
	memset(&e, 0, sizeof(e));
	n = fi_cq_readerr(cq, &e, 0);
	if (n < 0)
		return n;
	err->ctx = (uint64_t)(uintptr_t)e.op_context;
	err->flags = e.flags;
	err->len = e.len;
	err->olen = e.olen;
	err->data = e.data;
	err->tag = e.tag;
	err->err = e.err;
	err->prov_errno = e.prov_errno;
	err->text[0] = 0;
	s = fi_cq_strerror(cq, e.prov_errno, e.err_data, err->text, sizeof(err->text));
	if (s && s != err->text) {
		strncpy(err->text, s, sizeof(err->text) - 1);
		err->text[sizeof(err->text) - 1] = 0;
	}
	return n;
}

uint64_t weft_cntr_read(uintptr_t c) { return fi_cntr_read((struct fid_cntr *)c); }
uint64_t weft_cntr_readerr(uintptr_t c) { return fi_cntr_readerr((struct fid_cntr *)c); }
int weft_cntr_add(uintptr_t c, uint64_t v) { return fi_cntr_add((struct fid_cntr *)c, v); }
int weft_cntr_set(uintptr_t c, uint64_t v) { return fi_cntr_set((struct fid_cntr *)c, v); }
uint64_t weft_cntr_spin(uintptr_t c, uint64_t threshold, int spins, int pace) {
	uint64_t v;
	do {
		v = fi_cntr_read((struct fid_cntr *)c);
	} while (v < threshold && --spins > 0 && poll_pace(pace));
	return v;
}

ssize_t weft_send(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t ctx) {
	if (!EP(ep)->msg)
		return -FI_ENOSYS;
	return fi_send(EP(ep), buf, len, VOIDP(desc), dest, VOIDP(ctx));
}
ssize_t weft_senddata(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t ctx) {
	if (!EP(ep)->msg)
		return -FI_ENOSYS;
	return fi_senddata(EP(ep), buf, len, VOIDP(desc), data, dest, VOIDP(ctx));
}
ssize_t weft_recv(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t src, uint64_t ctx) {
	if (!EP(ep)->msg)
		return -FI_ENOSYS;
	return fi_recv(EP(ep), buf, len, VOIDP(desc), src, VOIDP(ctx));
}
ssize_t weft_inject(uintptr_t ep, void *buf, size_t len, uint64_t dest) {
	if (!EP(ep)->msg)
		return -FI_ENOSYS;
	return fi_inject(EP(ep), buf, len, dest);
}
ssize_t weft_injectdata(uintptr_t ep, void *buf, size_t len, uint64_t data, uint64_t dest) {
	if (!EP(ep)->msg)
		return -FI_ENOSYS;
	return fi_injectdata(EP(ep), buf, len, data, dest);
}
ssize_t weft_tsend(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t tag, uint64_t ctx) {
	if (!EP(ep)->tagged)
		return -FI_ENOSYS;
	return fi_tsend(EP(ep), buf, len, VOIDP(desc), dest, tag, VOIDP(ctx));
}
ssize_t weft_tsenddata(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t tag, uint64_t ctx) {
	if (!EP(ep)->tagged)
		return -FI_ENOSYS;
	return fi_tsenddata(EP(ep), buf, len, VOIDP(desc), data, dest, tag, VOIDP(ctx));
}
ssize_t weft_tinject(uintptr_t ep, void *buf, size_t len, uint64_t dest, uint64_t tag) {
	if (!EP(ep)->tagged)
		return -FI_ENOSYS;
	return fi_tinject(EP(ep), buf, len, dest, tag);
}
ssize_t weft_tinjectdata(uintptr_t ep, void *buf, size_t len, uint64_t data, uint64_t dest, uint64_t tag) {
	if (!EP(ep)->tagged)
		return -FI_ENOSYS;
	return fi_tinjectdata(EP(ep), buf, len, data, dest, tag);
}
ssize_t weft_trecv(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t src, uint64_t tag, uint64_t ignore, uint64_t ctx) {
	if (!EP(ep)->tagged)
		return -FI_ENOSYS;
	return fi_trecv(EP(ep), buf, len, VOIDP(desc), src, tag, ignore, VOIDP(ctx));
}
ssize_t weft_write(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx) {
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	return fi_write(EP(ep), buf, len, VOIDP(desc), dest, raddr, key, VOIDP(ctx));
}
ssize_t weft_writedata(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx) {
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	return fi_writedata(EP(ep), buf, len, VOIDP(desc), data, dest, raddr, key, VOIDP(ctx));
}
ssize_t weft_writemsg(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx, uint64_t flags) {
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	struct iovec iov;
	struct fi_rma_iov rma;
	struct fi_msg_rma msg;
	void *d = VOIDP(desc);
	iov.iov_base = buf;
	iov.iov_len = len;
	rma.addr = raddr;
	rma.len = len;
	rma.key = key;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.desc = &d;
	msg.iov_count = 1;
	msg.addr = dest;
	msg.rma_iov = &rma;
	msg.rma_iov_count = 1;
	msg.context = VOIDP(ctx);
	msg.data = data;
	return fi_writemsg(EP(ep), &msg, flags);
}
ssize_t weft_inject_write(uintptr_t ep, void *buf, size_t len, uint64_t dest, uint64_t raddr, uint64_t key) {
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	return fi_inject_write(EP(ep), buf, len, dest, raddr, key);
}
ssize_t weft_inject_writedata(uintptr_t ep, void *buf, size_t len, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t key) {
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	return fi_inject_writedata(EP(ep), buf, len, data, dest, raddr, key);
}
ssize_t weft_read(uintptr_t ep, void *buf, size_t len, uintptr_t desc, uint64_t src, uint64_t raddr, uint64_t key, uint64_t ctx) {
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	return fi_read(EP(ep), buf, len, VOIDP(desc), src, raddr, key, VOIDP(ctx));
}
ssize_t weft_atomic(uintptr_t ep, void *buf, size_t count, uintptr_t desc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx) {
	if (!EP(ep)->atomic)
		return -FI_ENOSYS;
	return fi_atomic(EP(ep), buf, count, VOIDP(desc), dest, raddr, key, (enum fi_datatype)dt, (enum fi_op)op, VOIDP(ctx));
}
ssize_t weft_fetch_atomic(uintptr_t ep, void *buf, size_t count, uintptr_t desc, void *res, uintptr_t rdesc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx) {
	if (!EP(ep)->atomic)
		return -FI_ENOSYS;
	return fi_fetch_atomic(EP(ep), buf, count, VOIDP(desc), res, VOIDP(rdesc), dest, raddr, key, (enum fi_datatype)dt, (enum fi_op)op, VOIDP(ctx));
}
ssize_t weft_compare_atomic(uintptr_t ep, void *buf, size_t count, uintptr_t desc, void *cmp, uintptr_t cdesc, void *res, uintptr_t rdesc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx) {
	if (!EP(ep)->atomic)
		return -FI_ENOSYS;
	return fi_compare_atomic(EP(ep), buf, count, VOIDP(desc), cmp, VOIDP(cdesc), res, VOIDP(rdesc), dest, raddr, key, (enum fi_datatype)dt, (enum fi_op)op, VOIDP(ctx));
}
ssize_t weft_atomicmsg(uintptr_t ep, void *buf, size_t count, uintptr_t desc, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op, uint64_t ctx, uint64_t flags) {
	struct fi_ioc ioc;
	struct fi_rma_ioc rma;
	struct fi_msg_atomic msg;
	void *d = VOIDP(desc);
	if (!EP(ep)->atomic)
		return -FI_ENOSYS;
	ioc.addr = buf;
	ioc.count = count;
	rma.addr = raddr;
	rma.count = count;
	rma.key = key;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &ioc;
	msg.desc = &d;
	msg.iov_count = 1;
	msg.addr = dest;
	msg.rma_iov = &rma;
	msg.rma_iov_count = 1;
	msg.datatype = (enum fi_datatype)dt;
	msg.op = (enum fi_op)op;
	msg.context = VOIDP(ctx);
	return fi_atomicmsg(EP(ep), &msg, flags);
}
ssize_t weft_inject_atomic(uintptr_t ep, void *buf, size_t count, uint64_t dest, uint64_t raddr, uint64_t key, int dt, int op) {
	if (!EP(ep)->atomic)
		return -FI_ENOSYS;
	return fi_inject_atomic(EP(ep), buf, count, dest, raddr, key, (enum fi_datatype)dt, (enum fi_op)op);
}
int weft_atomicvalid(uintptr_t ep, int kind, int dt, int op, size_t *count) {
	if (!EP(ep)->atomic)
		return -FI_ENOSYS;
	switch (kind) {
	case 1:
		return fi_fetch_atomicvalid(EP(ep), (enum fi_datatype)dt, (enum fi_op)op, count);
	case 2:
		return fi_compare_atomicvalid(EP(ep), (enum fi_datatype)dt, (enum fi_op)op, count);
	default:
		return fi_atomicvalid(EP(ep), (enum fi_datatype)dt, (enum fi_op)op, count);
	}
}
#define UNPACK_IOV(segs, n)                                                  \
	struct iovec iov[WEFT_MAX_IOV];                                      \
	void *desc[WEFT_MAX_IOV];                                            \
	size_t i_;                                                           \
	if ((n) > WEFT_MAX_IOV)                                              \
		return -FI_EINVAL;                                           \
	for (i_ = 0; i_ < (n); i_++) {                                       \
		iov[i_].iov_base = VOIDP((segs)[3 * i_]);                    \
		iov[i_].iov_len = (size_t)(segs)[3 * i_ + 1];                \
		desc[i_] = VOIDP((segs)[3 * i_ + 2]);                        \
	}

ssize_t weft_sendv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t dest, uint64_t ctx) {
	UNPACK_IOV(segs, n);
	if (!EP(ep)->msg)
		return -FI_ENOSYS;
	return fi_sendv(EP(ep), iov, desc, n, dest, VOIDP(ctx));
}
ssize_t weft_recvv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t src, uint64_t ctx) {
	UNPACK_IOV(segs, n);
	if (!EP(ep)->msg)
		return -FI_ENOSYS;
	return fi_recvv(EP(ep), iov, desc, n, src, VOIDP(ctx));
}
ssize_t weft_tsendv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t dest, uint64_t tag, uint64_t ctx) {
	UNPACK_IOV(segs, n);
	if (!EP(ep)->tagged)
		return -FI_ENOSYS;
	return fi_tsendv(EP(ep), iov, desc, n, dest, tag, VOIDP(ctx));
}
ssize_t weft_trecvv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t src, uint64_t tag, uint64_t ignore, uint64_t ctx) {
	UNPACK_IOV(segs, n);
	if (!EP(ep)->tagged)
		return -FI_ENOSYS;
	return fi_trecvv(EP(ep), iov, desc, n, src, tag, ignore, VOIDP(ctx));
}
ssize_t weft_writev(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t dest, uint64_t raddr, uint64_t key, uint64_t ctx) {
	UNPACK_IOV(segs, n);
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	return fi_writev(EP(ep), iov, desc, n, dest, raddr, key, VOIDP(ctx));
}
ssize_t weft_readv(uintptr_t ep, const uint64_t *segs, size_t n, uint64_t src, uint64_t raddr, uint64_t key, uint64_t ctx) {
	UNPACK_IOV(segs, n);
	if (!EP(ep)->rma)
		return -FI_ENOSYS;
	return fi_readv(EP(ep), iov, desc, n, src, raddr, key, VOIDP(ctx));
}

ssize_t weft_cancel(uintptr_t ep, uint64_t ctx) { return fi_cancel(&EP(ep)->fid, VOIDP(ctx)); }

static ssize_t weft_post_one(uintptr_t ep, const struct weft_op *o) {
	switch (o->kind) {
	case WEFT_OP_RECV:
		return weft_recv(ep, o->buf, o->len, o->desc, o->addr, o->ctx);
	case WEFT_OP_SEND:
		return weft_send(ep, o->buf, o->len, o->desc, o->addr, o->ctx);
	case WEFT_OP_SENDDATA:
		return weft_senddata(ep, o->buf, o->len, o->desc, o->data, o->addr, o->ctx);
	case WEFT_OP_INJECT:
		return weft_inject(ep, o->buf, o->len, o->addr);
	case WEFT_OP_INJECTDATA:
		return weft_injectdata(ep, o->buf, o->len, o->data, o->addr);
	case WEFT_OP_TRECV:
		return weft_trecv(ep, o->buf, o->len, o->desc, o->addr, o->tag, o->ignore, o->ctx);
	case WEFT_OP_TSEND:
		return weft_tsend(ep, o->buf, o->len, o->desc, o->addr, o->tag, o->ctx);
	case WEFT_OP_TSENDDATA:
		return weft_tsenddata(ep, o->buf, o->len, o->desc, o->data, o->addr, o->tag, o->ctx);
	case WEFT_OP_TINJECT:
		return weft_tinject(ep, o->buf, o->len, o->addr, o->tag);
	case WEFT_OP_TINJECTDATA:
		return weft_tinjectdata(ep, o->buf, o->len, o->data, o->addr, o->tag);
	case WEFT_OP_WRITE:
		return weft_write(ep, o->buf, o->len, o->desc, o->addr, o->raddr, o->key, o->ctx);
	case WEFT_OP_WRITEDATA:
		return weft_writedata(ep, o->buf, o->len, o->desc, o->data, o->addr, o->raddr, o->key, o->ctx);
	case WEFT_OP_INJECTWRITE:
		return weft_inject_write(ep, o->buf, o->len, o->addr, o->raddr, o->key);
	case WEFT_OP_READ:
		return weft_read(ep, o->buf, o->len, o->desc, o->addr, o->raddr, o->key, o->ctx);
	case WEFT_OP_WRITEMSG:
		return weft_writemsg(ep, o->buf, o->len, o->desc, o->data, o->addr, o->raddr, o->key, o->ctx, o->flags);
	case WEFT_OP_INJECTWRITEDATA:
		return weft_inject_writedata(ep, o->buf, o->len, o->data, o->addr, o->raddr, o->key);
	}
	return -FI_EINVAL; /* Go validates kinds first */
}

static int64_t weft_batch_err(size_t i, ssize_t ret) {
	return -(int64_t)(((uint64_t)i << 32) | ((uint64_t)(-ret) & 0xffffffffu));
}

int64_t weft_post_batch(uintptr_t ep, const struct weft_op *ops, size_t n) {
	size_t i;
	ssize_t ret;
	for (i = 0; i < n; i++) {
		ret = weft_post_one(ep, &ops[i]);
		if (ret != 0)
			return weft_batch_err(i, ret);
	}
	return (int64_t)n;
}

int64_t weft_post_read(uintptr_t ep, const struct weft_op *ops, size_t n,
		uintptr_t cqp, struct weft_comp *out, size_t count, int spins, int pace) {
	struct fid_cq *cq = (struct fid_cq *)cqp;
	size_t i;
	ssize_t ret = 0;
	uint64_t again = 0;
	for (i = 0; i < n; i++) {
		ret = weft_post_one(ep, &ops[i]);
		if (ret == -FI_EAGAIN) {
			again = 1;
			break;
		}
		if (ret != 0)
			return weft_batch_err(i, ret);
	}
	if (count > 64)
		count = 64;
	do {
		ret = read_once(cq, out, count);
	} while (ret == -FI_EAGAIN && --spins > 0 && poll_pace(pace));
	if (ret == -FI_EAGAIN || (again && ret < 0))
		ret = 0;
	if (ret < 0)
		return weft_batch_err(n, ret);
	return (int64_t)((again << 62) | ((uint64_t)i << 32) | (uint64_t)ret);
}

int64_t weft_cq_wait_word(uintptr_t cqp, const volatile uint64_t *word, uint64_t want,
		struct weft_comp *out, size_t count, int spins, int pace) {
	struct fid_cq *cq = (struct fid_cq *)cqp;
	ssize_t ret;
	if (count > 64)
		count = 64;
	if (__atomic_load_n(word, __ATOMIC_ACQUIRE) >= want)
		return (int64_t)1 << 32;
	do {
		ret = read_once(cq, out, count);
		if (ret < 0 && ret != -FI_EAGAIN)
			return ret;
		/* The read drove progress, which may have written the word:
		 * look before pacing the next poll. */
		if (__atomic_load_n(word, __ATOMIC_ACQUIRE) >= want)
			return ((int64_t)1 << 32) | (ret > 0 ? ret : 0);
		if (ret > 0)
			return ret;
	} while (--spins > 0 && poll_pace(pace));
	return 0;
}

/* Signals carried in remote CQ data (signal.go has the encoding). */

static inline uint64_t sig_mask(unsigned b) { return b >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << b) - 1); }

/* sig_one stores the signal d into mem; 0 when it did, -1 when d is not a
 * valid signal for this sink (the entry is then handed back as an ordinary
 * completion). Every index is checked against nslots or norigins before
 * memory is touched. */
static int sig_one(uint64_t d, uint64_t *mem, uint64_t nslots, unsigned sbits,
		uint64_t *stage, uint64_t norigins) {
	uint64_t slot, origin, v;
	unsigned part;
	if (sbits > WEFT_SIG_MAX_SLOT_BITS)
		return -1;
	if ((d >> 62) == 2) { /* set: slot, value */
		unsigned vb = 62 - sbits;
		slot = (d >> vb) & sig_mask(sbits);
		if (slot >= nslots)
			return -1;
		__atomic_store_n(&mem[slot], d & sig_mask(vb), __ATOMIC_RELEASE);
		return 0;
	}
	if ((d >> 62) != 3)
		return -1;
	part = (unsigned)(d >> 60) & 3;
	switch (part) {
	case 0: /* high half */
	case 1: /* low half */
		origin = (d >> 32) & sig_mask(28);
		if (origin >= norigins)
			return -1;
		stage[2 * origin + part] = (d & 0xffffffffu) | ((uint64_t)1 << 32);
		return 0;
	case 2: /* commit */
		origin = (d >> sbits) & sig_mask(60 - sbits);
		slot = d & sig_mask(sbits);
		if (origin >= norigins || slot >= nslots)
			return -1;
		if (!(stage[2 * origin] >> 32) || !(stage[2 * origin + 1] >> 32))
			return -1; /* a half is missing */
		v = (stage[2 * origin] << 32) | (stage[2 * origin + 1] & 0xffffffffu);
		stage[2 * origin] = stage[2 * origin + 1] = 0;
		__atomic_store_n(&mem[slot], v, __ATOMIC_RELEASE);
		return 0;
	}
	return -1;
}

size_t weft_sig_apply(struct weft_comp *c, size_t n, uint64_t *mem, uint64_t nslots, int slot_bits,
		uint64_t *stage, uint64_t norigins, uint64_t *applied) {
	size_t i, k = 0;
	for (i = 0; i < n; i++) {
		if ((c[i].flags & FI_REMOTE_CQ_DATA) &&
				sig_one(c[i].data, mem, nslots, (unsigned)slot_bits, stage, norigins) == 0) {
			(*applied)++;
			continue;
		}
		if (k != i)
			c[k] = c[i];
		k++;
	}
	return k;
}

/* sig_drain reads cq until a read returns fewer entries than asked for (the
 * queue was empty: every completion the provider had generated so far has
 * been read) or out is full, applying signals as it goes. It returns how
 * many other completions it left in out; when it read nothing but an
 * error, the (negative) error. An error after other completions is left
 * queued for the next read. */
static ssize_t sig_drain(struct fid_cq *cq, struct weft_comp *out, size_t count,
		uint64_t *mem, uint64_t nslots, int slot_bits, uint64_t *stage, uint64_t norigins,
		uint64_t *applied) {
	size_t total = 0, room, kept;
	ssize_t n;
	int reads;
	for (reads = 0; reads < WEFT_SIG_MAX_READS; reads++) {
		room = count - total;
		n = read_once(cq, out + total, room);
		if (n < 0)
			return total > 0 ? (ssize_t)total : n;
		kept = weft_sig_apply(out + total, (size_t)n, mem, nslots, slot_bits, stage, norigins, applied);
		total += kept;
		if ((size_t)n < room || total == count)
			break;
	}
	return (ssize_t)total;
}

int64_t weft_cq_signals(uintptr_t cqp, uint64_t *mem, uint64_t nslots, int slot_bits,
		uint64_t *stage, uint64_t norigins, uint64_t *applied,
		const volatile uint64_t *word, uint64_t want,
		struct weft_comp *out, size_t count, int spins, int pace) {
	struct fid_cq *cq = (struct fid_cq *)cqp;
	uint64_t before;
	ssize_t ret;
	if (count > 64)
		count = 64;
	if (count == 0)
		return -FI_EINVAL;
	if (word && __atomic_load_n(word, __ATOMIC_ACQUIRE) >= want)
		return (int64_t)1 << 32;
	do {
		before = *applied;
		ret = sig_drain(cq, out, count, mem, nslots, slot_bits, stage, norigins, applied);
		if (ret < 0 && ret != -FI_EAGAIN)
			return ret;
		/* The read drove progress and applied signals: the word may be
		 * there now, so look before pacing the next poll. */
		if (word && __atomic_load_n(word, __ATOMIC_ACQUIRE) >= want)
			return ((int64_t)1 << 32) | (ret > 0 ? ret : 0);
		if (ret > 0)
			return ret;
		if (!word && *applied != before)
			return 0; /* a plain read returns once something happened */
	} while (--spins > 0 && poll_pace(pace));
	return 0;
}

int64_t weft_fast_call(struct weft_fast *a) {
	const struct weft_op *ops = (const struct weft_op *)a->ops;
	struct weft_comp *out = (struct weft_comp *)a->out;
	const volatile uint64_t *word = (const volatile uint64_t *)a->word;
	int pace = (int)a->pace;
	switch (a->kind) {
	case WEFT_FAST_POST_BATCH:
		return weft_post_batch(a->ep, ops, a->n);
	case WEFT_FAST_POST_ONE:
		return weft_post_one(a->ep, ops);
	case WEFT_FAST_POST_READ:
		return weft_post_read(a->ep, ops, a->n, a->cq, out, a->count, (int)a->spins, pace);
	case WEFT_FAST_CQ_READ:
		return weft_cq_read(a->cq, out, a->count, (int)a->spins, pace);
	case WEFT_FAST_CQ_WAIT_WORD:
		return weft_cq_wait_word(a->cq, word, a->want, out, a->count, (int)a->spins, pace);
	case WEFT_FAST_CQ_SIGNALS:
		return weft_cq_signals(a->cq, (uint64_t *)a->mem, a->nslots, (int)a->slot_bits,
				(uint64_t *)a->stage, a->norigins, &a->applied, word, a->want, out, a->count,
				(int)a->spins, pace);
	}
	return -FI_EINVAL;
}

uintptr_t weft_fast_fn(void) { return (uintptr_t)&weft_fast_call; }

uintptr_t weft_stack_alloc(size_t size) {
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return 0;
	if (mprotect(p, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE) != 0) {
		munmap(p, size);
		return 0;
	}
	return (uintptr_t)p;
}

void weft_stack_free(uintptr_t base, size_t size) { munmap((void *)base, size); }
