// A fake CUDA library for testing the collector on machines without a GPU.
//
// It implements the handful of runtime (cudaEvent*, cudaStream*) and driver
// (cuEvent*, cuStream*) calls the collector dlopens, over a simulated
// device: each stream has a "busy until" time that fake_launch pushes
// forward (a kernel of some duration), an event recorded on a stream
// executes when the stream is free, and its device timestamp is the host
// time then, passed through a device clock with an offset and a drift.
// cudaEventQuery reports an event complete once the host time passes its
// execution time plus a visibility delay.
//
// Time is CLOCK_MONOTONIC, or, in manual mode, whatever fake_set_now says,
// so tests can be deterministic. fake_* functions control it and count the
// calls made (process-wide and per thread).
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EV_MAGIC 0x45564e54
#define ST_MAGIC 0x5354524d

typedef struct {
	int magic;
	int recorded;
	int64_t at;    // host time the event executes
	int64_t ts;    // device timestamp
} fevent;

typedef struct {
	int magic;
	int64_t busy;  // host time the stream is free again
} fstream;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fstream default_stream = {ST_MAGIC, 0};
static int manual;
static int64_t manual_now;
static double drift_ppm;
static int64_t dev_offset;
static int64_t visible_delay;
static int ndevices = 1;
static long live_events;

enum { C_EVCREATE, C_EVDESTROY, C_EVRECORD, C_EVQUERY, C_ELAPSED, C_STCREATE, C_STDESTROY, C_SETDEV, C_BADHANDLE, NCOUNT };
static const char* count_names[NCOUNT] = {"event_create", "event_destroy", "event_record", "event_query",
	"elapsed_time", "stream_create", "stream_destroy", "set_device", "bad_handle"};
static long counts[NCOUNT];
static __thread long tcounts[NCOUNT];

static void count(int c) {
	__atomic_add_fetch(&counts[c], 1, __ATOMIC_RELAXED);
	tcounts[c]++;
}

static int64_t now_locked(void) {
	if (manual) return manual_now;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t device_time(int64_t host) {
	return host + dev_offset + (int64_t)((double)host * drift_ppm / 1e6);
}

// ---- controls ----

// fake_set_manual switches between manual time (starting at now) and
// CLOCK_MONOTONIC. The default stream is idle afterwards.
void fake_set_manual(int on, int64_t now) {
	pthread_mutex_lock(&mu);
	manual = on;
	manual_now = now;
	default_stream.busy = 0;
	pthread_mutex_unlock(&mu);
}
void fake_advance(int64_t ns) {
	pthread_mutex_lock(&mu);
	manual_now += ns;
	pthread_mutex_unlock(&mu);
}
void fake_set_clock(double ppm, int64_t offset) {
	pthread_mutex_lock(&mu);
	drift_ppm = ppm;
	dev_offset = offset;
	pthread_mutex_unlock(&mu);
}
void fake_set_visible_delay(int64_t ns) { visible_delay = ns; }
void fake_set_devices(int n) { ndevices = n; }
// fake_launch enqueues a kernel of dur ns on stream (0: the default stream).
void fake_launch(uintptr_t stream, int64_t dur) {
	fstream* s = stream ? (fstream*)stream : &default_stream;
	pthread_mutex_lock(&mu);
	int64_t now = now_locked();
	if (s->busy < now) s->busy = now;
	s->busy += dur;
	pthread_mutex_unlock(&mu);
}
// fake_event_device_ns returns an event's device timestamp.
int64_t fake_event_device_ns(uintptr_t ev) { return ((fevent*)ev)->ts; }
static int count_index(const char* name) {
	for (int i = 0; i < NCOUNT; i++)
		if (strcmp(name, count_names[i]) == 0) return i;
	return -1;
}
long fake_count(const char* name) {
	int i = count_index(name);
	return i < 0 ? -1 : __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
}
long fake_thread_count(const char* name) {
	int i = count_index(name);
	return i < 0 ? -1 : tcounts[i];
}
long fake_live_events(void) { return __atomic_load_n(&live_events, __ATOMIC_RELAXED); }
void fake_reset_counts(void) {
	for (int i = 0; i < NCOUNT; i++) __atomic_store_n(&counts[i], 0, __ATOMIC_RELAXED);
	memset(tcounts, 0, sizeof tcounts);
}

// ---- the runtime API ----

enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorInvalidDevice = 101,
	cudaErrorInvalidResourceHandle = 400, cudaErrorNotReady = 600 };

const char* cudaGetErrorString(int code) {
	switch (code) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorNotReady: return "device not ready";
	}
	return "unknown error";
}

int cudaGetDeviceCount(int* n) { *n = ndevices; return ndevices ? cudaSuccess : 100; }

int cudaSetDevice(int d) {
	count(C_SETDEV);
	return d >= 0 && d < ndevices ? cudaSuccess : cudaErrorInvalidDevice;
}

int cudaEventCreateWithFlags(void** ev, unsigned flags) {
	(void)flags;
	count(C_EVCREATE);
	fevent* e = calloc(1, sizeof *e);
	e->magic = EV_MAGIC;
	*ev = e;
	__atomic_add_fetch(&live_events, 1, __ATOMIC_RELAXED);
	return cudaSuccess;
}

static fevent* event(void* p) {
	fevent* e = p;
	if (!e || e->magic != EV_MAGIC) {
		count(C_BADHANDLE);
		return 0;
	}
	return e;
}

static fstream* stream(void* p) {
	if (!p) return &default_stream;
	fstream* s = p;
	if (s->magic != ST_MAGIC) {
		count(C_BADHANDLE);
		return 0;
	}
	return s;
}

int cudaEventDestroy(void* p) {
	count(C_EVDESTROY);
	fevent* e = event(p);
	if (!e) return cudaErrorInvalidResourceHandle;
	e->magic = 0;
	free(e);
	__atomic_sub_fetch(&live_events, 1, __ATOMIC_RELAXED);
	return cudaSuccess;
}

int cudaEventRecord(void* p, void* sp) {
	count(C_EVRECORD);
	fevent* e = event(p);
	fstream* s = stream(sp);
	if (!e || !s) return cudaErrorInvalidResourceHandle;
	pthread_mutex_lock(&mu);
	int64_t now = now_locked();
	e->at = s->busy > now ? s->busy : now;
	e->ts = device_time(e->at);
	e->recorded = 1;
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

static int ready(fevent* e) {
	pthread_mutex_lock(&mu);
	int ok = now_locked() >= e->at + visible_delay;
	pthread_mutex_unlock(&mu);
	return ok;
}

int cudaEventQuery(void* p) {
	count(C_EVQUERY);
	fevent* e = event(p);
	if (!e) return cudaErrorInvalidResourceHandle;
	return !e->recorded || ready(e) ? cudaSuccess : cudaErrorNotReady;
}

int cudaEventElapsedTime(float* ms, void* a, void* b) {
	count(C_ELAPSED);
	fevent* s = event(a);
	fevent* e = event(b);
	if (!s || !e || !s->recorded || !e->recorded) return cudaErrorInvalidResourceHandle;
	if (!ready(s) || !ready(e)) return cudaErrorNotReady;
	*ms = (float)((double)(e->ts - s->ts) / 1e6);
	return cudaSuccess;
}

int cudaStreamCreateWithFlags(void** sp, unsigned flags) {
	(void)flags;
	count(C_STCREATE);
	fstream* s = calloc(1, sizeof *s);
	s->magic = ST_MAGIC;
	*sp = s;
	return cudaSuccess;
}

int cudaStreamDestroy(void* sp) {
	count(C_STDESTROY);
	fstream* s = stream(sp);
	if (!s || s == &default_stream) return cudaErrorInvalidResourceHandle;
	s->magic = 0;
	free(s);
	return cudaSuccess;
}

// ---- the driver API: the same simulation under the cu* names ----

static int ctx_token;

int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int* n) { return cudaGetDeviceCount(n); }
int cuDeviceGet(int* dev, int ordinal) {
	if (ordinal < 0 || ordinal >= ndevices) return cudaErrorInvalidDevice;
	*dev = ordinal;
	return 0;
}
int cuDevicePrimaryCtxRetain(void** ctx, int dev) { (void)dev; *ctx = &ctx_token; return 0; }
int cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return 0; }
int cuCtxSetCurrent(void* ctx) { count(C_SETDEV); return ctx == &ctx_token ? 0 : 201; }
int cuGetErrorString(int code, const char** s) { *s = cudaGetErrorString(code); return 0; }
int cuEventCreate(void** ev, unsigned flags) { return cudaEventCreateWithFlags(ev, flags); }
int cuEventDestroy_v2(void* ev) { return cudaEventDestroy(ev); }
int cuEventRecord(void* ev, void* s) { return cudaEventRecord(ev, s); }
int cuEventQuery(void* ev) { return cudaEventQuery(ev); }
int cuEventElapsedTime(float* ms, void* a, void* b) { return cudaEventElapsedTime(ms, a, b); }
int cuStreamCreate(void** s, unsigned flags) { return cudaStreamCreateWithFlags(s, flags); }
int cuStreamDestroy_v2(void* s) { return cudaStreamDestroy(s); }
