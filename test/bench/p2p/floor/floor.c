/*
 * floor: what this machine allows for test/bench/p2p's measurements,
 * without any messaging library: the same patterns in a few lines of C,
 * between processes forked from this one.
 *
 *   floor pingpong KIND ITERS WARMUP SIZE...
 *     Ping-pong of SIZE-byte messages between two processes, each half
 *     round trip one copy of the whole message by the receiver:
 *       cma     process_vm_readv from the sender's buffer (malloc'd once
 *               and reused, as the MPI programs' buffers are)
 *       cmathp  the same with both buffers 2 MiB-aligned and advised
 *               MADV_HUGEPAGE (transparent huge pages where the kernel's
 *               setting is madvise)
 *       cmafresh the same into a receive buffer malloc'd (and freed) for
 *               every message, so every copy faults its pages in
 *       memcpy  one process, memcpy of SIZE bytes between two buffers
 *               (malloc'd, reused): the copy alone, no second process
 *     The handshake is a counter per direction in a shared page, polled.
 *     Output: RESULT lat SIZE <half round trip, us>, RESULT bw SIZE <MB/s>.
 *
 *   floor copy KIND SIZE ITERS
 *     The copy alone, timed one by one: a peer process holds a SIZE-byte
 *     buffer and sleeps; this one reads it ITERS times with
 *     process_vm_readv (KIND cma: malloc'd buffers; cmathp: transparent
 *     huge pages on both sides) or copies between two of its own buffers
 *     (memcpy). Nothing spins, so the fastest copies are the floor even on
 *     a busy machine.
 *     Output: RESULT copymin SIZE <fastest copy, us>, RESULT copymed SIZE
 *     <median copy, us>.
 *
 *   floor shmcopy KIND SIZE ITERS
 *     One process copies SIZE bytes into a buffer of shared memory (KIND
 *     plain: memcpy; stream: non-temporal stores, as internal/memcopy),
 *     the other copies them out, in turn (a counter per side in a shared
 *     page, polled). Output: RESULT shmcopy SIZE <one copy in and out, us>.
 *
 *   floor msgrate PAIRS WINDOW WINDOWS WARMUP SIZE
 *     PAIRS sender processes each stream SIZE-byte messages to a receiver
 *     process of their own through a single-producer single-consumer ring
 *     of 512 64-byte cells in shared memory (weft's ring protocol: payload
 *     inline, one release store of the cell's sequence word publishes it,
 *     the consumer hands its position back every 64 cells), WINDOW
 *     messages per window; the receiver copies each payload into the
 *     window's buffer and answers each window with an acknowledgement
 *     through a second ring (osu_mbw_mr's pattern, without matching or
 *     requests). When there are more processes than cores, an empty poll
 *     yields the core (sched_yield), as weft and Open MPI do then.
 *     Output: RESULT msgrate SIZE <messages of all pairs per second>.
 *
 * With FLOOR_PIN set, process i runs on core i modulo the cores.
 *
 * Build: cc -O2 -o floor floor.c
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long arg(const char *s, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == 0 || *end != 0 || v < 0) {
		fprintf(stderr, "floor: %s '%s': not a non-negative integer\n", what, s);
		exit(2);
	}
	return v;
}

static void *shared(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("floor: mmap");
		exit(1);
	}
	return p;
}

static int crowded;

/* pin puts process i on core i mod the cores when FLOOR_PIN is set. */
static void pin(int i)
{
	if (getenv("FLOOR_PIN") == NULL)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(i % sysconf(_SC_NPROCESSORS_ONLN), &set);
	sched_setaffinity(0, sizeof set, &set);
}

static void relax(void)
{
	if (crowded)
		sched_yield();
	else
		__builtin_ia32_pause();
}

/* A barrier of n processes on a shared counter (generation in the upper half). */
static void barrier(volatile uint64_t *b, int n)
{
	uint64_t gen = __atomic_load_n(b, __ATOMIC_ACQUIRE) >> 32;
	uint64_t v = __atomic_add_fetch(b, 1, __ATOMIC_ACQ_REL);
	if ((v & 0xffffffff) == (uint64_t)n) {
		__atomic_store_n(b, (gen + 1) << 32, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(b, __ATOMIC_ACQUIRE) >> 32 == gen)
		relax();
}

/* ---- ping-pong ---- */

struct ppctl {
	volatile uint64_t flag[2]; /* messages sent by rank i so far */
	volatile uint64_t addr[2]; /* rank i's send buffer */
	volatile int pid[2];
	volatile uint64_t bar;
};

static char *alloc(size_t n, int thp)
{
	if (!thp) {
		char *p = malloc(n ? n : 1);
		if (p == NULL)
			exit(1);
		memset(p, 1, n);
		return p;
	}
	size_t al = 2 << 20, sz = (n + al - 1) / al * al;
	void *p;
	if (posix_memalign(&p, al, sz ? sz : al) != 0)
		exit(1);
	if (madvise(p, sz ? sz : al, MADV_HUGEPAGE) != 0)
		perror("floor: madvise(MADV_HUGEPAGE)");
	memset(p, 1, n);
	return p;
}

static void readfrom(int pid, char *dst, uint64_t src, size_t n)
{
	struct iovec l = {dst, n}, r = {(void *)src, n};
	ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
	if (got != (ssize_t)n) {
		perror("floor: process_vm_readv");
		exit(1);
	}
}

static void pingpong(const char *kind, long iters, long warmup, int nsizes, long *sizes)
{
	long maxsz = 0;
	for (int i = 0; i < nsizes; i++)
		if (sizes[i] > maxsz)
			maxsz = sizes[i];
	if (strcmp(kind, "memcpy") == 0) {
		char *a = alloc(maxsz, 0), *b = alloc(maxsz, 0);
		for (int i = 0; i < nsizes; i++) {
			long n = sizes[i];
			for (long k = 0; k < warmup; k++)
				memcpy(b, a, n);
			double t0 = now();
			for (long k = 0; k < iters; k++) {
				memcpy(b, a, n);
				__asm__ volatile("" ::"r"(b) : "memory");
			}
			double us = (now() - t0) * 1e6 / iters;
			printf("RESULT lat %ld %.4f\nRESULT bw %ld %.4f\n", n, us, n, n / us);
		}
		return;
	}
	int thp = strcmp(kind, "cmathp") == 0, fresh = strcmp(kind, "cmafresh") == 0;
	if (!thp && !fresh && strcmp(kind, "cma") != 0) {
		fprintf(stderr, "floor: pingpong kind %s: want cma, cmathp, cmafresh or memcpy\n", kind);
		exit(2);
	}
	struct ppctl *c = shared(sizeof *c);
	pid_t child = fork();
	if (child < 0) {
		perror("floor: fork");
		exit(1);
	}
	int me = child == 0;
	pin(me);
	char *sb = alloc(maxsz, thp), *rb = fresh ? NULL : alloc(maxsz, thp);
	c->addr[me] = (uint64_t)(uintptr_t)sb;
	c->pid[me] = getpid();
	barrier(&c->bar, 2);
	int peer = c->pid[1 - me];
	uint64_t seq = 0;
	for (int i = 0; i < nsizes; i++) {
		long n = sizes[i];
		double t0 = 0;
		for (long k = 0; k < warmup + iters; k++) {
			if (k == warmup) {
				barrier(&c->bar, 2);
				t0 = now();
			}
			seq++;
			for (int turn = 0; turn < 2; turn++) {
				if (turn == me) { /* receive: wait for the peer's message, copy it */
					while (__atomic_load_n(&c->flag[1 - me], __ATOMIC_ACQUIRE) != seq)
						__builtin_ia32_pause();
					char *dst = fresh ? malloc(n ? n : 1) : rb;
					if (dst == NULL)
						exit(1);
					readfrom(peer, dst, c->addr[1 - me], n);
					if (fresh)
						free(dst);
				} else /* send: announce the buffer */
					__atomic_store_n(&c->flag[me], seq, __ATOMIC_RELEASE);
			}
		}
		double us = (now() - t0) * 1e6 / (2.0 * iters);
		if (me == 0)
			printf("RESULT lat %ld %.4f\nRESULT bw %ld %.4f\n", n, us, n, n / us);
	}
	fflush(stdout);
	if (me == 1)
		_exit(0);
	int st;
	waitpid(child, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "floor: peer failed\n");
		exit(1);
	}
}

/* ---- the copy alone ---- */

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void copyonly(const char *kind, long n, long iters)
{
	int thp = strcmp(kind, "cmathp") == 0, mem = strcmp(kind, "memcpy") == 0;
	if (!thp && !mem && strcmp(kind, "cma") != 0) {
		fprintf(stderr, "floor: copy kind %s: want cma, cmathp or memcpy\n", kind);
		exit(2);
	}
	struct ppctl *c = shared(sizeof *c);
	pid_t child = -1;
	if (!mem) {
		child = fork();
		if (child < 0) {
			perror("floor: fork");
			exit(1);
		}
		if (child == 0) {
			char *sb = alloc(n, thp);
			c->addr[1] = (uint64_t)(uintptr_t)sb;
			__atomic_store_n(&c->flag[1], 1, __ATOMIC_RELEASE);
			for (;;)
				pause();
		}
		while (__atomic_load_n(&c->flag[1], __ATOMIC_ACQUIRE) != 1)
			usleep(100);
	}
	char *src = mem ? alloc(n, 0) : NULL, *dst = alloc(n, thp);
	double *t = calloc(iters, sizeof *t);
	for (long k = -iters / 10; k < iters; k++) {
		double t0 = now();
		if (mem) {
			memcpy(dst, src, n);
			__asm__ volatile("" ::"r"(dst) : "memory");
		} else
			readfrom(child, dst, c->addr[1], n);
		if (k >= 0)
			t[k] = (now() - t0) * 1e6;
	}
	if (!mem) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	qsort(t, iters, sizeof *t, cmpd);
	printf("RESULT copymin %ld %.4f\nRESULT copymed %ld %.4f\n", n, t[0], n, t[iters / 2]);
}

/* ---- a copy through shared memory ---- */

/* streamcopy copies n bytes (a multiple of 128) to 32-byte aligned d with
 * non-temporal stores, as internal/memcopy's Stream does. */
__attribute__((target("avx2"))) static void streamcopy(char *d, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i += 128) {
		__m256i a = _mm256_loadu_si256((const void *)(s + i)), b = _mm256_loadu_si256((const void *)(s + i + 32));
		__m256i e = _mm256_loadu_si256((const void *)(s + i + 64)), f = _mm256_loadu_si256((const void *)(s + i + 96));
		_mm256_stream_si256((void *)(d + i), a);
		_mm256_stream_si256((void *)(d + i + 32), b);
		_mm256_stream_si256((void *)(d + i + 64), e);
		_mm256_stream_si256((void *)(d + i + 96), f);
	}
	_mm_sfence();
}

/* shmcopy: one process copies n bytes into a shared buffer (KIND plain:
 * memcpy; stream: non-temporal stores), the other copies them out
 * (memcpy), in turn; the time of one copy in and out. */
static void shmcopy(const char *kind, long n, long iters)
{
	int stream = strcmp(kind, "stream") == 0;
	if (!stream && strcmp(kind, "plain") != 0) {
		fprintf(stderr, "floor: shmcopy kind %s: want plain or stream\n", kind);
		exit(2);
	}
	n = (n + 127) & ~127L;
	struct ppctl *c = shared(sizeof *c);
	char *buf = shared(n);
	pid_t child = fork();
	if (child < 0) {
		perror("floor: fork");
		exit(1);
	}
	int me = child == 0;
	pin(me);
	char *own = alloc(n, 0);
	memset(own, me + 1, n);
	long warmup = iters / 10;
	double t0 = now();
	for (long k = 0; k < warmup + iters; k++) {
		if (k == warmup)
			t0 = now();
		uint64_t seq = 2 * (uint64_t)k + 1;
		if (me == 0) {
			while (__atomic_load_n(&c->flag[1], __ATOMIC_ACQUIRE) != seq - 1)
				__builtin_ia32_pause();
			if (stream)
				streamcopy(buf, own, n);
			else
				memcpy(buf, own, n);
			__atomic_store_n(&c->flag[0], seq, __ATOMIC_RELEASE);
		} else {
			while (__atomic_load_n(&c->flag[0], __ATOMIC_ACQUIRE) != seq)
				__builtin_ia32_pause();
			memcpy(own, buf, n);
			__atomic_store_n(&c->flag[1], seq + 1, __ATOMIC_RELEASE);
		}
	}
	if (me == 1)
		_exit(0);
	while (__atomic_load_n(&c->flag[1], __ATOMIC_ACQUIRE) != 2 * (uint64_t)(warmup + iters))
		__builtin_ia32_pause();
	double us = (now() - t0) * 1e6 / iters;
	int st;
	waitpid(child, &st, 0);
	printf("RESULT shmcopy %ld %.4f\n", n, us);
}

/* ---- message rate ---- */

enum { CELLS = 512, CELL = 64, LAG = CELLS / 8 };

struct cell {
	volatile uint64_t seq;
	uint64_t user;
	uint32_t len, flags;
	char payload[40];
};

struct ring {
	struct cell cells[CELLS];
	volatile uint64_t read __attribute__((aligned(64)));
	char pad[56];
};

struct prod {
	struct ring *r;
	uint64_t write, cached;
};

struct cons {
	struct ring *r;
	uint64_t read, pub;
};

static void produce(struct prod *p, const char *b, uint32_t n)
{
	while (p->write - p->cached >= CELLS) {
		p->cached = __atomic_load_n(&p->r->read, __ATOMIC_ACQUIRE);
		if (p->write - p->cached >= CELLS)
			relax();
	}
	struct cell *c = &p->r->cells[p->write % CELLS];
	c->user = 1;
	c->len = n;
	memcpy(c->payload, b, n);
	__atomic_store_n(&c->seq, p->write + 1, __ATOMIC_RELEASE);
	p->write++;
}

static uint32_t consume(struct cons *q, char *b)
{
	struct cell *c = &q->r->cells[q->read % CELLS];
	while (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != q->read + 1) {
		if (q->pub != q->read) {
			q->pub = q->read;
			__atomic_store_n(&q->r->read, q->read, __ATOMIC_RELEASE);
		}
		relax();
	}
	uint32_t n = c->len;
	memcpy(b, c->payload, n);
	q->read++;
	if (q->read - q->pub >= LAG) {
		q->pub = q->read;
		__atomic_store_n(&q->r->read, q->read, __ATOMIC_RELEASE);
	}
	return n;
}

static void msgrate(long pairs, long window, long windows, long warmup, long size)
{
	if (size > 40) {
		fprintf(stderr, "floor: msgrate: SIZE %ld past one cell's 40 bytes\n", size);
		exit(2);
	}
	long np = 2 * pairs;
	crowded = np > sysconf(_SC_NPROCESSORS_ONLN);
	struct ring *rings = shared(2 * pairs * sizeof(struct ring)); /* data ring, ack ring per pair */
	volatile uint64_t *bar = shared(4096);
	double *t = (double *)(bar + 8);
	pid_t *kids = calloc(np, sizeof *kids);
	int me = 0;
	for (int i = 1; i < np; i++) {
		pid_t k = fork();
		if (k < 0) {
			perror("floor: fork");
			exit(1);
		}
		if (k == 0) {
			me = i;
			break;
		}
		kids[i] = k;
	}
	int pair = me % pairs, sender = me < pairs;
	pin(me);
	struct prod p = {&rings[2 * pair + (sender ? 0 : 1)], 0, 0};
	struct cons q = {&rings[2 * pair + (sender ? 1 : 0)], 0, 0};
	char msg[40] = {0}, *bufs = calloc(window, 40);
	for (long w = 0; w < warmup + windows; w++) {
		if (w == warmup) {
			barrier(bar, np);
			if (me == 0)
				t[0] = now();
		}
		if (sender) {
			for (long k = 0; k < window; k++)
				produce(&p, msg, size);
			consume(&q, msg);
		} else {
			for (long k = 0; k < window; k++)
				consume(&q, bufs + 40 * k);
			produce(&p, msg, 0);
		}
	}
	barrier(bar, np);
	if (me != 0)
		_exit(0);
	double el = now() - t[0];
	for (int i = 1; i < np; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "floor: process %d failed\n", i);
			exit(1);
		}
	}
	printf("RESULT msgrate %ld %.1f\n", size, (double)pairs * window * windows / el);
}

int main(int argc, char **argv)
{
	if (argc >= 6 && strcmp(argv[1], "pingpong") == 0) {
		long iters = arg(argv[3], "ITERS"), warmup = arg(argv[4], "WARMUP");
		int n = argc - 5;
		long *sizes = calloc(n, sizeof *sizes);
		for (int i = 0; i < n; i++)
			sizes[i] = arg(argv[5 + i], "SIZE");
		if (iters < 1) {
			fprintf(stderr, "floor: ITERS must be at least 1\n");
			return 2;
		}
		pingpong(argv[2], iters, warmup, n, sizes);
		return 0;
	}
	if (argc == 5 && strcmp(argv[1], "copy") == 0) {
		long n = arg(argv[3], "SIZE"), iters = arg(argv[4], "ITERS");
		if (iters < 1) {
			fprintf(stderr, "floor: ITERS must be at least 1\n");
			return 2;
		}
		copyonly(argv[2], n, iters);
		return 0;
	}
	if (argc == 7 && strcmp(argv[1], "msgrate") == 0) {
		long pairs = arg(argv[2], "PAIRS"), window = arg(argv[3], "WINDOW"), windows = arg(argv[4], "WINDOWS");
		long warmup = arg(argv[5], "WARMUP"), size = arg(argv[6], "SIZE");
		if (pairs < 1 || window < 1 || windows < 1) {
			fprintf(stderr, "floor: PAIRS, WINDOW and WINDOWS must be at least 1\n");
			return 2;
		}
		msgrate(pairs, window, windows, warmup, size);
		return 0;
	}
	if (argc == 5 && strcmp(argv[1], "shmcopy") == 0) {
		shmcopy(argv[2], arg(argv[3], "SIZE"), arg(argv[4], "ITERS"));
		return 0;
	}
	fprintf(stderr, "usage: floor pingpong cma|cmathp|cmafresh|memcpy ITERS WARMUP SIZE...\n"
			"       floor copy cma|cmathp|memcpy SIZE ITERS\n"
			"       floor shmcopy plain|stream SIZE ITERS\n"
			"       floor msgrate PAIRS WINDOW WINDOWS WARMUP SIZE\n");
	return 2;
}
