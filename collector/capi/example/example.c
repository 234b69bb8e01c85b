/*
 * example.c: a rank of a two-stage GPipe pipeline instrumented with the
 * ppprof C ABI. Run it once per rank:
 *
 *     go build -buildmode=c-shared -o libppprof.so ./collector/capi
 *     cc -I collector/capi -o example collector/capi/example/example.c \
 *        -L. -lppprof -Wl,-rpath,.
 *     ./example /tmp/trace 0 & ./example /tmp/trace 1; wait
 *     ppprof analyze /tmp/trace
 *
 * There is no real model or network here: "work" spins for a while, and
 * each send is recorded as completing at once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ppprof.h"

#define MICROBATCHES 4
#define STEPS 2

/* check stops the program when a ppprof call fails. */
static int64_t check(int64_t rc, const char* what) {
	if (rc < 0) {
		fprintf(stderr, "%s: error %lld: %s\n", what, (long long)rc, ppprof_last_error());
		exit(1);
	}
	return rc;
}

static void work(int us) {
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

/* p2p records a send or receive posted and completed at once. */
static void p2p(int h, int kind, int peer, int64_t step, int mb) {
	ppprof_span s = check(ppprof_p2p_issue(h, kind, peer, step, mb, 0, 4 * 16 * 32 * 4, "4x16x32", "fp32", 0), "issue");
	work(20);
	check(ppprof_p2p_complete(h, s, PPPROF_SAME_STREAM), "complete");
}

int main(int argc, char** argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: %s DIR RANK\n", argv[0]);
		return 2;
	}
	const char* dir = argv[1];
	int rank = atoi(argv[2]);
	int next = rank + 1, prev = rank - 1, last = 1;
	char config[1024];
	snprintf(config, sizeof config,
	         "dir=%s; rank=%d; stage=%d; job=c-example; world_size=2; pp=2; microbatches=%d;"
	         "schedule=gpipe; clock=host; flush_ms=100",
	         dir, rank, rank, MICROBATCHES);
	if (ppprof_abi_version() != PPPROF_ABI_VERSION) {
		fprintf(stderr, "libppprof ABI %d, header %d\n", ppprof_abi_version(), PPPROF_ABI_VERSION);
		return 1;
	}
	int h = (int)check(ppprof_init(config), "ppprof_init");
	int data = (int)check(ppprof_kind("DATA"), "ppprof_kind");

	for (int64_t step = 0; step < STEPS; step++) {
		check(ppprof_step(h, step), "step");
		ppprof_span d = check(ppprof_begin(h, data, step, PPPROF_NO_MICROBATCH, 0, 0), "begin DATA");
		work(50);
		check(ppprof_end(h, d, PPPROF_SAME_STREAM, 0), "end DATA");
		for (int mb = 0; mb < MICROBATCHES; mb++) {
			if (rank > 0) p2p(h, PPPROF_RECV_F, prev, step, mb);
			ppprof_span f = check(ppprof_begin(h, PPPROF_F, step, mb, 0, 0), "begin F");
			work(300);
			check(ppprof_end(h, f, PPPROF_SAME_STREAM, 1 << 20), "end F");
			if (rank < last) p2p(h, PPPROF_SEND_F, next, step, mb);
		}
		for (int mb = 0; mb < MICROBATCHES; mb++) {
			if (rank < last) p2p(h, PPPROF_RECV_B, next, step, mb);
			ppprof_span b = check(ppprof_begin(h, PPPROF_B, step, mb, 0, 0), "begin B");
			work(600);
			check(ppprof_end(h, b, PPPROF_SAME_STREAM, 0), "end B");
			if (rank > 0) p2p(h, PPPROF_SEND_B, prev, step, mb);
		}
		ppprof_span o = check(ppprof_opt_begin(h, step, 0), "opt begin");
		work(100);
		check(ppprof_opt_end(h, o, step == STEPS - 1 /* the last step overflowed: skipped */), "opt end");
	}

	/* Errors come back as negative codes, with the reason as text. */
	ppprof_span bad = ppprof_p2p_issue(h, PPPROF_F, next, 0, 0, 0, 0, NULL, NULL, 0);
	printf("a forward posted as P2P: %lld (%s)\n", (long long)bad, ppprof_last_error());

	check(ppprof_flush(h), "flush");
	ppprof_stats st;
	check(ppprof_stats_get(h, &st), "stats");
	check(ppprof_close(h), "close");
	printf("rank %d: recorded %lld, written %lld, dropped %lld, rejected %lld\n", rank,
	       (long long)st.recorded, (long long)st.written, (long long)st.dropped, (long long)st.rejected);
	if (ppprof_flush(h) != PPPROF_EHANDLE) {
		fprintf(stderr, "flush after close did not fail\n");
		return 1;
	}
	return 0;
}
