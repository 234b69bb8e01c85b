/*
 * bench.c: the cost of one recorded event through the C ABI (ppprof_begin
 * and ppprof_end, or ppprof_p2p_issue and ppprof_p2p_complete), host clock.
 * Usage: bench DIR N. Prints "begin_end_ns X" and "p2p_ns Y".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ppprof.h"

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char** argv) {
	if (argc != 3) return 2;
	long n = atol(argv[2]);
	char config[512];
	snprintf(config, sizeof config, "dir=%s; rank=1; clock=host; buffer_events=65536; batch_events=16384", argv[1]);
	int h = ppprof_init(config);
	if (h < 0) {
		fprintf(stderr, "%s\n", ppprof_last_error());
		return 1;
	}
	const long chunk = 16384; /* let the writer catch up between chunks, off the clock */
	double spent = 0, spent_p2p = 0;
	for (long done = 0; done < n; done += chunk) {
		double t0 = now_ns();
		for (long i = 0; i < chunk; i++) ppprof_end(h, ppprof_begin(h, PPPROF_F, 1, (int32_t)i, 0, 0), PPPROF_SAME_STREAM, 0);
		spent += now_ns() - t0;
		ppprof_flush(h);
		t0 = now_ns();
		for (long i = 0; i < chunk; i++)
			ppprof_p2p_complete(h, ppprof_p2p_issue(h, PPPROF_SEND_F, 2, 1, (int32_t)i, 0, 4096, "4x16x32", "bf16", 0),
			                    PPPROF_SAME_STREAM);
		spent_p2p += now_ns() - t0;
		ppprof_flush(h);
	}
	ppprof_stats st;
	ppprof_stats_get(h, &st);
	ppprof_close(h);
	long total = (n + chunk - 1) / chunk * chunk;
	printf("begin_end_ns %.1f\np2p_ns %.1f\ndropped %lld\n", spent / total, spent_p2p / total, (long long)st.dropped);
	return 0;
}
