// hot.c: the C ABI's hot path. ppprof_begin/end, ppprof_p2p_issue/complete,
// ppprof_opt_begin/end and ppprof_set_time write the recorder's ring
// (collector/ring.h) directly, without entering the Go runtime: a call
// from C or Python costs what a C function call costs, whatever the Go
// runtime is doing (garbage collection, the writer). Everything else goes
// through Go (main.go). The protocol is ring.go's.
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cuda.h"
#include "../ring.h"
#include "_cgo_export.h"
#define PPPROF_NO_PROTOTYPES // _cgo_export.h declares the Go half's functions
#include "ppprof.h"

void ppprofSetLastError(const char* msg);

#define MAX_HANDLES 64

// ppc_handles[h-1] is handle h's control block; 0 when closed. Control
// blocks are never freed, so a caller racing ppprof_close reads a block
// whose closed flag is set.
static ppc_ctl* ppc_handles[MAX_HANDLES];

// Kinds the hot path accepts (the process-wide kind table, as Go has it).
static uint8_t ppc_kinds[PPC_MAX_KINDS / 8];
static int ppc_opt_skip;

void ppc_set_handle(int h, uintptr_t ctl) {
	if (h >= 1 && h <= MAX_HANDLES) __atomic_store_n(&ppc_handles[h - 1], (ppc_ctl*)ctl, __ATOMIC_RELEASE);
}

void ppc_allow_kind(int k) {
	if (k > 0 && k < PPC_MAX_KINDS) __atomic_or_fetch(&ppc_kinds[k / 8], (uint8_t)(1 << (k % 8)), __ATOMIC_RELEASE);
}

void ppc_set_opt_skip(int k) { ppc_opt_skip = k; }

static int kind_ok(int k) {
	return k > 0 && k < PPC_MAX_KINDS && (__atomic_load_n(&ppc_kinds[k / 8], __ATOMIC_ACQUIRE) & (1 << (k % 8)));
}

static int is_p2p(int k) { return k >= PPPROF_SEND_F && k <= PPPROF_RECV_B; }

// kind_name names the well-known kinds in messages ("kind 42" otherwise).
static const char* kind_name(int k, char* buf, size_t n) {
	static const char* names[] = {"", "F", "B", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT"};
	if (k > 0 && k <= PPPROF_OPT) return names[k];
	snprintf(buf, n, "kind %d", k);
	return buf;
}

static int64_t fail(int64_t code, const char* fmt, ...) {
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ppprofSetLastError(msg);
	return code;
}

static ppc_ctl* get(int h) {
	ppc_ctl* c = 0;
	if (h >= 1 && h <= MAX_HANDLES) c = __atomic_load_n(&ppc_handles[h - 1], __ATOMIC_ACQUIRE);
	if (!c) fail(PPPROF_EHANDLE, "handle %d: no open recorder (closed, or never opened)", h);
	return c;
}

static int64_t now(ppc_ctl* c) {
	if (c->clock == PPC_CLOCK_VIRTUAL) return __atomic_load_n((int64_t*)(uintptr_t)c->virtual_ptr, __ATOMIC_ACQUIRE);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return c->mono_offset + (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// enter counts a hot-path call in flight; it fails once the recorder is
// closed (Close frees the slots when no call is in flight).
static int enter(ppc_ctl* c) {
	__atomic_add_fetch(&c->inflight, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST)) {
		__atomic_sub_fetch(&c->inflight, 1, __ATOMIC_SEQ_CST);
		return 0;
	}
	return 1;
}

static void leave(ppc_ctl* c) { __atomic_sub_fetch(&c->inflight, 1, __ATOMIC_SEQ_CST); }

#define reject(c, ...) (__atomic_add_fetch(&(c)->rejected, 1, __ATOMIC_RELAXED), fail(PPPROF_EINVAL, __VA_ARGS__))

// check applies the collector's CheckOp rules.
static int64_t check(ppc_ctl* c, int kind, int p2p, int32_t peer, int64_t step, int32_t mb, int32_t chunk, int64_t bytes) {
	char buf[32];
	if (!kind_ok(kind)) return reject(c, "bad kind: invalid kind %d", kind);
	if (p2p && !is_p2p(kind))
		return reject(c, "bad kind: %s is not a P2P kind (SEND_F, RECV_F, SEND_B, RECV_B)", kind_name(kind, buf, sizeof buf));
	if (!p2p && is_p2p(kind)) return reject(c, "bad kind: %s is a P2P kind: use ppprof_p2p_issue", kind_name(kind, buf, sizeof buf));
	if (p2p && peer < 0) return reject(c, "bad peer: peer %lld", (long long)peer);
	if (p2p && peer == c->rank) return reject(c, "bad peer: peer %lld is the rank itself", (long long)peer);
	if (step < 0) return reject(c, "bad label: step %lld (want >= 0)", (long long)step);
	if (mb < -1) return reject(c, "bad label: micro-batch %lld (want >= 0, or -1)", (long long)mb);
	if (chunk < 0) return reject(c, "bad label: chunk %lld (want >= 0)", (long long)chunk);
	if (bytes < 0) return reject(c, "bad label: bytes %lld (want >= 0)", (long long)bytes);
	return 0;
}

// record_start gives a CUDA slot its events and records the start event.
static int record_start(ppc_ctl* c, ppc_dev* d, uint64_t stream) {
	ppc_api* api = (ppc_api*)(uintptr_t)c->cuda;
	d->stream = stream;
	if (!d->start_ev || !d->end_ev) {
		void* ev = 0;
		if (!d->start_ev) {
			if (api->eventCreate(&ev, 0)) goto fail;
			d->start_ev = (uint64_t)(uintptr_t)ev;
		}
		if (!d->end_ev) {
			if (api->eventCreate(&ev, 0)) goto fail;
			d->end_ev = (uint64_t)(uintptr_t)ev;
		}
	}
	if (api->eventRecord((void*)(uintptr_t)d->start_ev, (void*)(uintptr_t)stream)) goto fail;
	return 1;
fail:
	__atomic_add_fetch(&c->dev_errors, 1, __ATOMIC_RELAXED);
	return 0;
}

// open claims a slot and publishes it open (ring.go: Recorder.open).
static int64_t open_op(ppc_ctl* c, int kind, int32_t peer, int64_t step, int32_t mb, int32_t chunk, int64_t bytes,
                       uint32_t shape, uint32_t dtype, uint64_t stream) {
	if (!enter(c)) return 0;
	uint64_t n = __atomic_load_n(&c->next, __ATOMIC_SEQ_CST);
	for (;;) {
		if (n - __atomic_load_n(&c->head, __ATOMIC_SEQ_CST) >= c->size) {
			__atomic_add_fetch(&c->dropped, 1, __ATOMIC_RELAXED);
			leave(c);
			return 0;
		}
		if (__atomic_compare_exchange_n(&c->next, &n, n + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
	}
	uint64_t i = n & c->mask;
	ppc_slot* s = &((ppc_slot*)(uintptr_t)c->slots)[i];
	s->kind = (uint16_t)kind;
	s->mb = mb;
	s->chunk = chunk;
	s->peer = peer;
	s->step = step;
	s->bytes = bytes;
	s->tokens = 0;
	s->flops = 0;
	s->shape = shape;
	s->dtype = dtype;
	s->flags = PPC_FLAG_HOST_ONLY;
	int64_t t = now(c);
	s->issue_ns = t;
	s->start_ns = t;
	if (c->clock == PPC_CLOCK_CUDA && record_start(c, &((ppc_dev*)(uintptr_t)c->dev)[i], stream)) {
		s->flags = 0;
		s->start_ns = INT64_MIN;
	}
	__atomic_store_n(&s->tag, n << 3 | PPC_ST_OPEN, __ATOMIC_SEQ_CST);
	leave(c);
	return (int64_t)(n + 1);
}

// end_op ends span (ring.go: Recorder.end).
static int end_op(ppc_ctl* c, int64_t span, uint64_t stream, int64_t mem, int skipped) {
	if (span < 0) return (int)fail(PPPROF_EINVAL, "span %lld: an error code, not a span", (long long)span);
	if (span == 0 || !enter(c)) return PPPROF_OK;
	uint64_t seq = (uint64_t)span - 1;
	ppc_slot* s = &((ppc_slot*)(uintptr_t)c->slots)[seq & c->mask];
	uint64_t want = seq << 3 | PPC_ST_OPEN;
	if (!__atomic_compare_exchange_n(&s->tag, &want, seq << 3 | PPC_ST_ENDING, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		leave(c); // ended twice, abandoned, or not a span of this recorder
		return PPPROF_OK;
	}
	s->end_ns = now(c);
	s->mem_bytes = mem > 0 ? mem : 0;
	s->end_kind = s->kind;
	if (skipped && s->kind == PPPROF_OPT && ppc_opt_skip > 0) s->end_kind = (uint16_t)ppc_opt_skip;
	if (s->flags & PPC_FLAG_HOST_ONLY) {
		__atomic_store_n(&s->tag, seq << 3 | PPC_ST_DONE, __ATOMIC_SEQ_CST);
	} else {
		ppc_dev* d = &((ppc_dev*)(uintptr_t)c->dev)[seq & c->mask];
		ppc_api* api = (ppc_api*)(uintptr_t)c->cuda;
		if (stream == PPPROF_SAME_STREAM) stream = d->stream;
		if (api->eventRecord((void*)(uintptr_t)d->end_ev, (void*)(uintptr_t)stream)) {
			__atomic_add_fetch(&c->dev_errors, 1, __ATOMIC_RELAXED);
			s->flags |= PPC_FLAG_END_HOST;
		}
		__atomic_store_n(&s->tag, seq << 3 | PPC_ST_ENDED, __ATOMIC_SEQ_CST);
	}
	leave(c);
	return PPPROF_OK;
}

// ---- labels: shape and dtype strings as ids, cached without Go ----

#define LABEL_SLOTS 1024
#define LABEL_PROBES 8
#define LABEL_MAX 255

static struct {
	const char* key; // published last (release); never changes after
	uint32_t id;
} ppc_labels[LABEL_SLOTS];
static pthread_mutex_t ppc_labels_mu = PTHREAD_MUTEX_INITIALIZER;

static uint32_t label(const char* s) {
	if (!s || !*s) return 0;
	size_t n = strnlen(s, LABEL_MAX + 1);
	if (n > LABEL_MAX) n = LABEL_MAX;
	uint64_t h = 1469598103934665603ull; // FNV-1a
	for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	for (int p = 0; p < LABEL_PROBES; p++) {
		size_t i = (h + p) % LABEL_SLOTS;
		const char* k = __atomic_load_n(&ppc_labels[i].key, __ATOMIC_ACQUIRE);
		if (!k) break;
		if (strncmp(k, s, n) == 0 && k[n] == 0) return ppc_labels[i].id;
	}
	// First sight: intern it in Go (rare), then cache it.
	char buf[LABEL_MAX + 1];
	memcpy(buf, s, n);
	buf[n] = 0;
	uint32_t id = ppprofLabelID(buf);
	pthread_mutex_lock(&ppc_labels_mu);
	for (int p = 0; p < LABEL_PROBES; p++) {
		size_t i = (h + p) % LABEL_SLOTS;
		const char* k = ppc_labels[i].key;
		if (k && strcmp(k, buf) == 0) break;
		if (!k) {
			char* copy = strdup(buf);
			if (copy) {
				ppc_labels[i].id = id;
				__atomic_store_n(&ppc_labels[i].key, copy, __ATOMIC_RELEASE);
			}
			break;
		}
	}
	pthread_mutex_unlock(&ppc_labels_mu);
	return id;
}

// ---- the exported hot path (ppprof.h) ----

int64_t ppprof_begin(int h, int kind, int64_t step, int32_t microbatch, int32_t chunk, uint64_t stream) {
	ppc_ctl* c = get(h);
	if (!c) return PPPROF_EHANDLE;
	int64_t bad = check(c, kind, 0, 0, step, microbatch, chunk, 0);
	if (bad) return bad;
	return open_op(c, kind, -1, step, microbatch, chunk, 0, 0, 0, stream);
}

int ppprof_end(int h, int64_t span, uint64_t stream, int64_t mem_bytes) {
	ppc_ctl* c = get(h);
	if (!c) return PPPROF_EHANDLE;
	return end_op(c, span, stream, mem_bytes, 0);
}

int64_t ppprof_p2p_issue(int h, int kind, int32_t peer, int64_t step, int32_t microbatch, int32_t chunk,
                         int64_t bytes, const char* shape, const char* dtype, uint64_t stream) {
	ppc_ctl* c = get(h);
	if (!c) return PPPROF_EHANDLE;
	int64_t bad = check(c, kind, 1, peer, step, microbatch, chunk, bytes);
	if (bad) return bad;
	return open_op(c, kind, peer, step, microbatch, chunk, bytes, label(shape), label(dtype), stream);
}

int ppprof_p2p_complete(int h, int64_t span, uint64_t stream) {
	ppc_ctl* c = get(h);
	if (!c) return PPPROF_EHANDLE;
	return end_op(c, span, stream, 0, 0);
}

int64_t ppprof_opt_begin(int h, int64_t step, uint64_t stream) {
	ppc_ctl* c = get(h);
	if (!c) return PPPROF_EHANDLE;
	int64_t bad = check(c, PPPROF_OPT, 0, 0, step, -1, 0, 0);
	if (bad) return bad;
	return open_op(c, PPPROF_OPT, -1, step, -1, 0, 0, 0, 0, stream);
}

int ppprof_opt_end(int h, int64_t span, int skipped) {
	ppc_ctl* c = get(h);
	if (!c) return PPPROF_EHANDLE;
	return end_op(c, span, PPPROF_SAME_STREAM, 0, skipped);
}

int ppprof_set_time(int h, int64_t ns) {
	ppc_ctl* c = get(h);
	if (!c) return PPPROF_EHANDLE;
	if (c->clock != PPC_CLOCK_VIRTUAL) return (int)fail(PPPROF_EINVAL, "set_time needs clock=virtual");
	__atomic_store_n((int64_t*)(uintptr_t)c->virtual_ptr, ns, __ATOMIC_RELEASE);
	return PPPROF_OK;
}
