/* UCX's active messages (ucp_am_send_nbx) doing what test/bench/am's weft
 * ranks do, on two processes of this node: the parent forks the second
 * rank and the two swap worker addresses over a socketpair.
 *
 *   am_ucx ITERS WARMUP WINDOW SIZE...
 *
 * lat: rank 0 sends an AM with an 8-byte header; rank 1's handler marks
 *      it and rank 1 answers with an AM of 8 bytes; µs per round trip.
 * rate: rank 0 sends WINDOW AMs of an 8-byte header and no data, rank 1's
 *      handler counts them and, at the window's last, rank 1 answers;
 *      messages per second.
 * bw SIZE: the same with SIZE bytes of data per AM, which rank 1's
 *      handler receives into its own buffer (ucp_am_recv_data_nbx for a
 *      rendezvous message, a copy otherwise); MB/s (10^6 bytes).
 * Output: "RESULT lat 8 US", "RESULT rate 8 MSGS", "RESULT bw SIZE MBS". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

enum { AM_PING = 1, AM_PONG, AM_DATA, AM_ACK };

static ucp_worker_h worker;
static ucp_ep_h ep;
static volatile long got;        /* AMs handled of the kind awaited */
static volatile long landed;     /* rendezvous payloads received */
static char *rbuf;

static void die(const char *what, ucs_status_t st) {
	fprintf(stderr, "am_ucx: %s: %s\n", what, ucs_status_string(st));
	exit(1);
}

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void recv_done(void *req, ucs_status_t st, size_t len, void *arg) {
	(void)len; (void)arg;
	if (st != UCS_OK)
		die("receive data", st);
	landed++;
	ucp_request_free(req);
}

static ucs_status_t on_am(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *p) {
	(void)arg; (void)hdr; (void)hlen;
	if (len > 0) {
		if (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
			ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK,
			                          .cb.recv_am = recv_done};
			ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker, data, rbuf, len, &rp);
			if (UCS_PTR_IS_ERR(r))
				die("ucp_am_recv_data_nbx", UCS_PTR_STATUS(r));
			if (r == NULL)
				landed++; /* else recv_done counts it and frees r */
		} else {
			memcpy(rbuf, data, len);
			landed++;
		}
	}
	got++;
	return UCS_OK;
}

static void wait_req(ucs_status_ptr_t r) {
	if (r == NULL)
		return;
	if (UCS_PTR_IS_ERR(r))
		die("send", UCS_PTR_STATUS(r));
	while (ucp_request_check_status(r) == UCS_INPROGRESS)
		ucp_worker_progress(worker);
	ucp_request_free(r);
}

static void send_am(unsigned id, const void *data, size_t len) {
	static uint64_t hdr = 42;
	ucp_request_param_t p = {.op_attr_mask = 0};
	wait_req(ucp_am_send_nbx(ep, id, &hdr, sizeof hdr, data, len, &p));
}

/* await progresses until n AMs (and n payloads, for bw) have arrived. */
static void await(long n, long payloads) {
	while (got < n || landed < payloads)
		ucp_worker_progress(worker);
}

static void xfer(int fd, void *b, size_t n, int out) {
	for (size_t k = 0; k < n;) {
		ssize_t r = out ? write(fd, (char *)b + k, n - k) : read(fd, (char *)b + k, n - k);
		if (r <= 0) {
			perror("am_ucx: address exchange");
			exit(1);
		}
		k += r;
	}
}

static void barrier(int fd) {
	char c = 0;
	xfer(fd, &c, 1, 1);
	xfer(fd, &c, 1, 0);
}

static void warm(void) { /* keep the core busy 100 ms, as every side-by-side rank does */
	double t0 = now();
	while (now() - t0 < 0.1)
		;
}

int main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: am_ucx ITERS WARMUP WINDOW SIZE...\n");
		return 2;
	}
	long iters = atol(argv[1]), warmup = atol(argv[2]), window = atol(argv[3]);
	size_t maxsz = 8;
	for (int i = 4; i < argc; i++)
		if ((size_t)atol(argv[i]) > maxsz)
			maxsz = atol(argv[i]);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		perror("socketpair");
		return 1;
	}
	pid_t child = fork();
	int me = child == 0, fd = sv[me];
	close(sv[1 - me]);

	ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
	ucp_context_h ctx;
	ucs_status_t st = ucp_init(&pp, NULL, &ctx);
	if (st != UCS_OK)
		die("ucp_init", st);
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
	                          .thread_mode = UCS_THREAD_MODE_SINGLE};
	if ((st = ucp_worker_create(ctx, &wp, &worker)) != UCS_OK)
		die("ucp_worker_create", st);
	ucp_address_t *addr;
	size_t alen;
	if ((st = ucp_worker_get_address(worker, &addr, &alen)) != UCS_OK)
		die("ucp_worker_get_address", st);
	uint64_t n64 = alen;
	xfer(fd, &n64, 8, 1);
	xfer(fd, addr, alen, 1);
	xfer(fd, &n64, 8, 0);
	void *peer = malloc(n64);
	xfer(fd, peer, n64, 0);
	ucp_ep_params_t ep_p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = peer};
	if ((st = ucp_ep_create(worker, &ep_p, &ep)) != UCS_OK)
		die("ucp_ep_create", st);
	for (unsigned id = AM_PING; id <= AM_ACK; id++) {
		ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB,
		                             .id = id, .cb = on_am};
		if ((st = ucp_worker_set_am_recv_handler(worker, &hp)) != UCS_OK)
			die("ucp_worker_set_am_recv_handler", st);
	}
	char *sbuf = malloc(maxsz);
	rbuf = malloc(maxsz);
	memset(sbuf, 1, maxsz);
	/* Wire the endpoints up both ways before timing. */
	send_am(AM_ACK, NULL, 0);
	await(1, 0);
	got = 0;
	barrier(fd);
	warm();
	barrier(fd);

	/* lat */
	double t0 = 0;
	for (long k = 0; k < warmup + iters; k++) {
		if (k == warmup)
			t0 = now();
		if (me == 0) {
			send_am(AM_PING, NULL, 0);
			await(k + 1, 0);
		} else {
			await(k + 1, 0);
			send_am(AM_PONG, sbuf, 8);
		}
	}
	if (me == 0)
		printf("RESULT lat 8 %.4f\n", (now() - t0) / iters * 1e6), fflush(stdout);
	got = landed = 0;
	barrier(fd);

	/* rate, then bw for each size: windows of AMs and an answer each */
	for (int s = 3; s < argc; s++) {
		size_t size = s == 3 ? 0 : (size_t)atol(argv[s]);
		long wins = (s == 3 ? iters : iters / 4 + 1) / window + 1, warm_w = wins / 10 + 1;
		ucs_status_ptr_t *reqs = calloc(window, sizeof *reqs);
		for (long w = 0; w < warm_w + wins; w++) {
			if (w == warm_w)
				t0 = now();
			if (me == 0) {
				static uint64_t hdr = 7;
				ucp_request_param_t p = {.op_attr_mask = 0};
				for (long i = 0; i < window; i++)
					reqs[i] = ucp_am_send_nbx(ep, AM_DATA, &hdr, sizeof hdr, sbuf, size, &p);
				for (long i = 0; i < window; i++)
					wait_req(reqs[i]);
				await(w + 1, 0);
			} else {
				await((w + 1) * window, size > 0 ? (w + 1) * window : 0);
				send_am(AM_ACK, NULL, 0);
			}
		}
		double el = now() - t0;
		if (me == 0 && s == 3)
			printf("RESULT rate 8 %.1f\n", wins * window / el);
		else if (me == 0)
			printf("RESULT bw %zu %.2f\n", size, (double)wins * window * size / el / 1e6);
		got = landed = 0;
		barrier(fd);
		free(reqs);
	}
	fflush(stdout);
	ucs_status_ptr_t cr = ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH);
	wait_req(cr);
	barrier(fd);
	ucp_worker_release_address(worker, addr);
	ucp_worker_destroy(worker);
	ucp_cleanup(ctx);
	if (me == 0) {
		int status;
		waitpid(child, &status, 0);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	return 0;
}
