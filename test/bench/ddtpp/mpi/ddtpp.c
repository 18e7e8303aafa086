/*
 * ddtpp: the MPI side of test/bench/ddtpp. Two ranks; for every case of a
 * recipe (its format is described in ../recipe.go) the case's MPI datatype
 * is built from the recipe's constructor calls and committed, its size and
 * extent checked against the recipe's, and then:
 *
 *   1. rank 0 sends COUNT elements of the type from a buffer holding the
 *      pattern of seed 1 and rank 1 receives the BYTES bytes as MPI_BYTE
 *      and returns their FNV-1a 64-bit hash: the packed stream;
 *   2. rank 1 sends the pattern of seed 2 as BYTES MPI_BYTEs and rank 0
 *      receives COUNT elements of the type into a zeroed buffer and hashes
 *      the whole buffer: the unpacked layout;
 *   3. a barrier, WARMUP untimed and ITERS timed round trips: rank 0 sends
 *      from one typed buffer and receives into another, rank 1 receives
 *      into its buffer and sends it back, both with the case's type
 *      (MPI_Send, MPI_Recv); rank 0 then checks that what came back packs
 *      to the stream it sent;
 *   4. the same ping-pong (a barrier, WARMUP untimed and ITERS timed round
 *      trips) of BYTES contiguous MPI_BYTEs between buffers of their own:
 *      rank 0 sends the pattern of seed 3 from one and receives into
 *      another, rank 1 receives into its buffer and sends it back; rank 0
 *      then checks that the pattern came back. This is the floor a typed
 *      send of the case cannot beat: the same bytes, nothing to pack.
 *
 * The pattern: x = seed * 2654435761, then per byte x = 1664525 x +
 * 1013904223 (mod 2^32) and the byte is x >> 24 (ddtcases.Fill).
 *
 * Output, from rank 0, per case:
 *   SUM pack NAME SIZE <hash, 16 hex digits>
 *   SUM unpack NAME SIZE <hash>
 *   RESULT mpi NAME SIZE <half round trip of step 3, microseconds>
 *   RESULT mpicontig NAME SIZE <half round trip of step 4, microseconds>
 *
 * Usage: ddtpp RECIPE   (exactly 2 ranks)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpibench.h"

static _Noreturn void fail(const char *what, const char *detail)
{
	fprintf(stderr, "ddtpp: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* The recipe, read token by token. */
static FILE *in;
static char tok[256];

static const char *word(void)
{
	if (fscanf(in, "%255s", tok) != 1)
		fail("recipe", "unexpected end");
	return tok;
}

static long long num(void)
{
	char *end;
	const char *w = word();
	long long v = strtoll(w, &end, 10);
	if (*w == '\0' || *end != '\0')
		fail("recipe: not an integer", w);
	return v;
}

/* A count or length that MPI takes as an int. */
static int inum(void)
{
	long long v = num();
	if (v < -2147483647LL || v > 2147483647LL)
		fail("recipe", "integer out of range of int");
	return (int)v;
}

static int *ints(int n)
{
	int *v = malloc((n > 0 ? n : 1) * sizeof *v);
	if (v == NULL)
		fail("out of memory", NULL);
	for (int i = 0; i < n; i++)
		v[i] = inum();
	return v;
}

static MPI_Aint *aints(int n)
{
	MPI_Aint *v = malloc((n > 0 ? n : 1) * sizeof *v);
	if (v == NULL)
		fail("out of memory", NULL);
	for (int i = 0; i < n; i++)
		v[i] = (MPI_Aint)num();
	return v;
}

static const struct {
	const char *name;
	MPI_Datatype t;
} named[] = {
	{"byte", MPI_BYTE}, {"bool", MPI_C_BOOL},
	{"int8", MPI_INT8_T}, {"int16", MPI_INT16_T}, {"int32", MPI_INT32_T}, {"int64", MPI_INT64_T},
	{"uint8", MPI_UINT8_T}, {"uint16", MPI_UINT16_T}, {"uint32", MPI_UINT32_T}, {"uint64", MPI_UINT64_T},
	{"float32", MPI_FLOAT}, {"float64", MPI_DOUBLE},
	{"complex64", MPI_C_FLOAT_COMPLEX}, {"complex128", MPI_C_DOUBLE_COMPLEX},
};

/* The types of the current case: built[i] is type line i; derived[i]
 * says whether it must be freed. */
static MPI_Datatype *built;
static int *derived;
static int nbuilt;

static MPI_Datatype ref(void)
{
	int id = inum();
	if (id < 0 || id >= nbuilt)
		fail("recipe", "reference to a type not defined before");
	return built[id];
}

/* buildOne reads one type line's KIND and arguments. */
static MPI_Datatype buildOne(int *isDerived)
{
	char kind[sizeof tok];
	MPI_Datatype t, old;
	snprintf(kind, sizeof kind, "%s", word());
	*isDerived = 1;
	if (strcmp(kind, "named") == 0) {
		const char *n = word();
		for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
			if (strcmp(n, named[i].name) == 0) {
				*isDerived = 0;
				return named[i].t;
			}
		fail("recipe: unknown named type", n);
	} else if (strcmp(kind, "contiguous") == 0) {
		int count = inum();
		old = ref();
		MPI_Type_contiguous(count, old, &t);
	} else if (strcmp(kind, "vector") == 0) {
		int count = inum(), bl = inum(), stride = inum();
		old = ref();
		MPI_Type_vector(count, bl, stride, old, &t);
	} else if (strcmp(kind, "hvector") == 0) {
		int count = inum(), bl = inum();
		MPI_Aint stride = (MPI_Aint)num();
		old = ref();
		MPI_Type_create_hvector(count, bl, stride, old, &t);
	} else if (strcmp(kind, "indexed") == 0) {
		int n = inum();
		int *bl = ints(n), *d = ints(n);
		old = ref();
		MPI_Type_indexed(n, bl, d, old, &t);
		free(bl);
		free(d);
	} else if (strcmp(kind, "hindexed") == 0) {
		int n = inum();
		int *bl = ints(n);
		MPI_Aint *d = aints(n);
		old = ref();
		MPI_Type_create_hindexed(n, bl, d, old, &t);
		free(bl);
		free(d);
	} else if (strcmp(kind, "indexed_block") == 0) {
		int n = inum(), bl = inum();
		int *d = ints(n);
		old = ref();
		MPI_Type_create_indexed_block(n, bl, d, old, &t);
		free(d);
	} else if (strcmp(kind, "hindexed_block") == 0) {
		int n = inum(), bl = inum();
		MPI_Aint *d = aints(n);
		old = ref();
		MPI_Type_create_hindexed_block(n, bl, d, old, &t);
		free(d);
	} else if (strcmp(kind, "struct") == 0) {
		int n = inum();
		int *bl = ints(n);
		MPI_Aint *d = aints(n);
		MPI_Datatype *ts = malloc((n > 0 ? n : 1) * sizeof *ts);
		if (ts == NULL)
			fail("out of memory", NULL);
		for (int i = 0; i < n; i++)
			ts[i] = ref();
		MPI_Type_create_struct(n, bl, d, ts, &t);
		free(bl);
		free(d);
		free(ts);
	} else if (strcmp(kind, "subarray") == 0) {
		int n = inum();
		int *sizes = ints(n), *subs = ints(n), *starts = ints(n);
		const char *o = word();
		int order = MPI_ORDER_C;
		if (strcmp(o, "fortran") == 0)
			order = MPI_ORDER_FORTRAN;
		else if (strcmp(o, "c") != 0)
			fail("recipe: subarray order", o);
		old = ref();
		MPI_Type_create_subarray(n, sizes, subs, starts, order, old, &t);
		free(sizes);
		free(subs);
		free(starts);
	} else if (strcmp(kind, "resized") == 0) {
		MPI_Aint lb = (MPI_Aint)num(), extent = (MPI_Aint)num();
		old = ref();
		MPI_Type_create_resized(old, lb, extent, &t);
	} else if (strcmp(kind, "dup") == 0) {
		old = ref();
		MPI_Type_dup(old, &t);
	} else {
		fail("recipe: unknown type kind", kind);
	}
	return t;
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	uint32_t x = (uint32_t)seed * 2654435761u;
	for (size_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		b[i] = (unsigned char)(x >> 24);
	}
}

static uint64_t fnv(const unsigned char *b, size_t n)
{
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static void *xmalloc(size_t n)
{
	void *p = calloc(n > 0 ? n : 1, 1);
	if (p == NULL)
		fail("out of memory", NULL);
	return p;
}

int main(int argc, char **argv)
{
	int rank, np;
	mpibench_start(&argc, &argv, &rank, &np);
	if (np != 2 || argc != 2) {
		if (rank == 0)
			fprintf(stderr, "ddtpp: usage: ddtpp RECIPE on exactly 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	in = fopen(argv[1], "r");
	if (in == NULL)
		fail("cannot open the recipe", argv[1]);
	if (strcmp(word(), "ddtpp") != 0 || num() != 1)
		fail("recipe", "want the header \"ddtpp 1\"");
	int peer = 1 - rank;
	while (fscanf(in, "%255s", tok) == 1) {
		if (strcmp(tok, "case") != 0)
			fail("recipe: want a case line, got", tok);
		char name[sizeof tok], size[sizeof tok];
		snprintf(name, sizeof name, "%s", word());
		snprintf(size, sizeof size, "%s", word());
		int count = inum();
		long long typed = num(), bytes = num(), tsize = num(), extent = num(), iters = num(), warmup = num();
		int ntypes = inum();
		if (typed < 0 || bytes < 0 || bytes > 2147483647LL || iters < 1 || warmup < 0 || ntypes < 1)
			fail("recipe: bad case line for", name);
		built = malloc(ntypes * sizeof *built);
		derived = malloc(ntypes * sizeof *derived);
		if (built == NULL || derived == NULL)
			fail("out of memory", NULL);
		for (nbuilt = 0; nbuilt < ntypes; nbuilt++) {
			if (strcmp(word(), "type") != 0 || num() != nbuilt)
				fail("recipe: want the next type line of", name);
			built[nbuilt] = buildOne(&derived[nbuilt]);
		}
		if (derived[ntypes - 1])
			MPI_Type_commit(&built[ntypes - 1]);
		MPI_Datatype t = built[ntypes - 1];
		int sz;
		MPI_Aint lb, ext;
		MPI_Type_size(t, &sz);
		MPI_Type_get_extent(t, &lb, &ext);
		if (sz != tsize || ext != extent || (long long)sz * count != bytes) {
			char d[256];
			snprintf(d, sizeof d, "%.100s/%.30s: MPI type size %d extent %lld, recipe %lld and %lld", name, size, sz,
				 (long long)ext, tsize, extent);
			fail("type differs from the recipe", d);
		}

		unsigned char *sb = xmalloc(typed), *rb = xmalloc(typed), *stream = xmalloc(bytes);
		uint64_t hpack = 0, hunpack = 0;
		/* 1. The packed stream. */
		if (rank == 0) {
			fill(sb, typed, 1);
			MPI_Send(sb, count, t, peer, 10, MPI_COMM_WORLD);
			MPI_Recv(&hpack, 1, MPI_UINT64_T, peer, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(stream, (int)bytes, MPI_BYTE, peer, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			hpack = fnv(stream, bytes);
			MPI_Send(&hpack, 1, MPI_UINT64_T, peer, 11, MPI_COMM_WORLD);
		}
		/* 2. The unpacked layout. */
		if (rank == 0) {
			MPI_Recv(rb, count, t, peer, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			hunpack = fnv(rb, typed);
			memset(rb, 0, typed);
		} else {
			fill(stream, bytes, 2);
			MPI_Send(stream, (int)bytes, MPI_BYTE, peer, 12, MPI_COMM_WORLD);
		}
		/* 3. The ping-pong. */
		double el = mpibench_pingpong(sb, rb, rb, count, t, rank, peer, warmup, iters);
		if (rank == 0) {
			unsigned char *back = xmalloc(bytes);
			int p1 = 0, p2 = 0;
			MPI_Pack(sb, count, t, stream, (int)bytes, &p1, MPI_COMM_WORLD);
			MPI_Pack(rb, count, t, back, (int)bytes, &p2, MPI_COMM_WORLD);
			if (p1 != bytes || p2 != bytes || memcmp(stream, back, bytes) != 0)
				fail("ping-pong did not bring the data back for", name);
			free(back);
			printf("SUM pack %s %s %016llx\n", name, size, (unsigned long long)hpack);
			printf("SUM unpack %s %s %016llx\n", name, size, (unsigned long long)hunpack);
			printf("RESULT mpi %s %s %.4f\n", name, size, el * 1e6 / (2.0 * iters));
			fflush(stdout);
		}
		/* 4. The contiguous ping-pong of the same bytes. */
		unsigned char *cs = xmalloc(bytes), *cr = xmalloc(bytes);
		if (rank == 0)
			fill(cs, bytes, 3);
		el = mpibench_pingpong(cs, cr, cr, (int)bytes, MPI_BYTE, rank, peer, warmup, iters);
		if (rank == 0) {
			if (memcmp(cs, cr, bytes) != 0)
				fail("contiguous ping-pong did not bring the data back for", name);
			printf("RESULT mpicontig %s %s %.4f\n", name, size, el * 1e6 / (2.0 * iters));
			fflush(stdout);
		}
		free(cs);
		free(cr);
		free(sb);
		free(rb);
		free(stream);
		for (int i = ntypes - 1; i >= 0; i--)
			if (derived[i])
				MPI_Type_free(&built[i]);
		free(built);
		free(derived);
	}
	fclose(in);
	MPI_Finalize();
	return 0;
}
