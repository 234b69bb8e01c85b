// The parts of the C ABI written in C: the per-thread last error and the
// exit hook. (cgo compiles this file into the library.)
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"

static __thread char last_error[1024];

const char* ppprof_last_error(void) { return last_error; }

void ppprofSetLastError(const char* msg) {
	strncpy(last_error, msg ? msg : "", sizeof last_error - 1);
	last_error[sizeof last_error - 1] = 0;
}

static void ppprof_atexit(void) { ppprofCloseAll(); }

void ppprofRegisterAtexit(void) {
	static int done;
	if (!done) {
		done = 1;
		atexit(ppprof_atexit);
	}
}
