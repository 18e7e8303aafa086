/*
 * inproc.c: the in-process reference for fabric's BenchmarkBatchPingPong8.
 *
 * Two shm RDM endpoints in one process, one thread drives both: A tinjects
 * 8 bytes to B, B reads its CQ until the message is in, reposts its receive
 * and tinjects back, A does the same. Same objects as the Go benchmark (one
 * FI_CQ_FORMAT_TAGGED CQ per endpoint for both directions, FI_AV_TABLE,
 * tagged receives with tag 1 from FI_ADDR_UNSPEC), but plain C calls.
 *
 *   inproc [-t] [iterations]
 *
 * -t starts an idle second thread first: glibc then takes its mutexes with
 * atomic instructions, as it must in a Go process, which always has several
 * threads. Build and run with test/bench/pingpong/inproc.sh.
 */
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                        \
	do {                                                            \
		long r_ = (long)(x);                                    \
		if (r_) {                                               \
			fprintf(stderr, "inproc: %s: %ld\n", #x, r_);   \
			exit(1);                                        \
		}                                                       \
	} while (0)

struct side {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t peer;
	char rx[64], tx[64];
};

static struct fid_domain *dom;
static struct side a, b;

static void open_side(struct fi_info *fi, struct side *s) {
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE, .size = 128};
	struct fi_av_attr aa = {.type = FI_AV_TABLE, .count = 2};
	CHECK(fi_endpoint(dom, fi, &s->ep, NULL));
	CHECK(fi_cq_open(dom, &ca, &s->cq, NULL));
	CHECK(fi_av_open(dom, &aa, &s->av, NULL));
	CHECK(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(s->ep, &s->av->fid, 0));
	CHECK(fi_enable(s->ep));
}

/* send tinjects 8 bytes to the peer, driving both sides while shm says EAGAIN. */
static void send(struct side *s) {
	struct fi_cq_tagged_entry e[1];
	while (fi_tinject(s->ep, s->tx, 8, s->peer, 1) == -FI_EAGAIN) {
		fi_cq_read(a.cq, e, 0);
		fi_cq_read(b.cq, e, 0);
	}
}

/* recv waits for the receive completion and reposts the receive. */
static void recv(struct side *s) {
	struct fi_cq_tagged_entry e[16];
	ssize_t n;
	while ((n = fi_cq_read(s->cq, e, 16)) == -FI_EAGAIN)
		;
	if (n < 0) {
		fprintf(stderr, "inproc: fi_cq_read: %zd\n", n);
		exit(1);
	}
	CHECK(fi_trecv(s->ep, s->rx, sizeof(s->rx), NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
}

static void *idle(void *arg) {
	for (;;)
		pause();
	return arg;
}

int main(int argc, char **argv) {
	int iters = 200000, threaded = 0, i, rep;
	struct fi_info *hints = fi_allocinfo(), *fi;
	struct fid_fabric *fab;
	char na[256], nb[256];
	size_t la = sizeof(na), lb = sizeof(nb);

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-t") == 0)
			threaded = 1;
		else
			iters = atoi(argv[i]);
	}
	if (threaded) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, idle, NULL));
	}
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->fabric_attr->prov_name = strdup("shm");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fi));
	CHECK(fi_fabric(fi->fabric_attr, &fab, NULL));
	CHECK(fi_domain(fab, fi, &dom, NULL));
	open_side(fi, &a);
	open_side(fi, &b);
	CHECK(fi_getname(&a.ep->fid, na, &la));
	CHECK(fi_getname(&b.ep->fid, nb, &lb));
	if (fi_av_insert(a.av, nb, 1, &a.peer, 0, NULL) != 1 || fi_av_insert(b.av, na, 1, &b.peer, 0, NULL) != 1) {
		fprintf(stderr, "inproc: fi_av_insert failed\n");
		return 1;
	}
	CHECK(fi_trecv(a.ep, a.rx, sizeof(a.rx), NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
	CHECK(fi_trecv(b.ep, b.rx, sizeof(b.rx), NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
	for (rep = 0; rep < 5; rep++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (i = 0; i < iters; i++) {
			send(&a);
			recv(&b);
			send(&b);
			recv(&a);
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("%s %.1f ns per round trip\n", threaded ? "threaded" : "single",
		       ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters);
	}
	return 0;
}
