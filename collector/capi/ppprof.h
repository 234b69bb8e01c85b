/*
 * ppprof.h: the C ABI of the ppprof collector, libppprof.so.
 *
 * Build the library with
 *     go build -buildmode=c-shared -o libppprof.so ./collector/capi
 * and link with -lppprof (or dlopen it). ABI version 1: functions are only
 * ever added; the meaning of existing ones does not change.
 *
 * One recorder per rank (process): ppprof_init opens it and returns a
 * handle. The hot-path calls (begin/end, p2p issue/complete, opt
 * begin/end, set_time) are plain C writing a ring buffer: under 100 ns,
 * they never enter the Go runtime, block on I/O or synchronise the GPU.
 * Every call is safe from any thread.
 *
 * Errors: functions return a negative PPPROF_E* code, and
 * ppprof_last_error() returns the reason as text (per thread). A span of 0
 * is not an error: the op was not recorded (the buffer was full, or the
 * recorder is closed); ending span 0 is a no-op.
 */
#ifndef PPPROF_H
#define PPPROF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PPPROF_ABI_VERSION 1

/* Return codes. */
#define PPPROF_OK 0
#define PPPROF_EINVAL (-1)  /* bad argument or configuration */
#define PPPROF_EHANDLE (-2) /* no open recorder with this handle */
#define PPPROF_EIO (-3)     /* creating or writing the trace file failed */
#define PPPROF_ENOCUDA (-4) /* clock=cuda, but no CUDA library or device */

/* The well-known kinds. ppprof_kind() gives ids for others ("DATA"). */
#define PPPROF_F 1      /* forward of one micro-batch */
#define PPPROF_B 2      /* backward (backward-input when W is separate) */
#define PPPROF_W 3      /* backward-weight */
#define PPPROF_SEND_F 4 /* send activations to the next stage */
#define PPPROF_RECV_F 5 /* receive activations from the previous stage */
#define PPPROF_SEND_B 6 /* send gradients to the previous stage */
#define PPPROF_RECV_B 7 /* receive gradients from the next stage */
#define PPPROF_OPT 8    /* optimizer step */

#define PPPROF_NO_MICROBATCH (-1)
/* As the stream of an end or complete: the stream the span began on. */
#define PPPROF_SAME_STREAM UINT64_MAX

/* A recorded op: > 0 recorded, 0 not recorded, < 0 an error code. */
typedef int64_t ppprof_span;

/* Counters of one recorder (ppprof_stats_get). */
typedef struct ppprof_stats {
	int64_t recorded;      /* ops recorded */
	int64_t written;       /* rows written as final rows */
	int64_t dropped;       /* ops dropped: the buffer was full */
	int64_t rejected;      /* ops refused as invalid */
	int64_t abandoned;     /* ops written as pending to free the buffer */
	int64_t device_errors; /* CUDA calls that failed (host times used) */
	int64_t watchdog;      /* times the watchdog wrote the pending ops */
} ppprof_stats;

#ifndef PPPROF_NO_PROTOTYPES

/* ppprof_abi_version returns PPPROF_ABI_VERSION of the library. */
int ppprof_abi_version(void);

/*
 * ppprof_init opens a recorder and returns its handle (> 0). config is
 * "key=value" pairs separated by ';' or newlines; dir is required:
 *
 *   dir=PATH             output directory (file: rank-NNNNN.arrows)
 *   rank, stage, pipeline, tp_rank              this rank's place (0)
 *   job, world_size, pp, tp, dp, cp, virtual, microbatches, schedule,
 *   device, peak_flops                          job metadata
 *   clock=auto|host|cuda|virtual   auto: cuda if a GPU is found, else host
 *   cuda_library=PATH, cuda_api=runtime|driver, cuda_device=N,
 *   anchor_interval_ms=N           CUDA clock options
 *   virtual_start_ns=N             start of the virtual clock
 *   buffer_events=N, batch_events=N, flush_ms=N, fsync=0|1,
 *   compression=none|lz4|zstd      sink options
 *   watchdog_ms=N                  0: default (60000); -1: off
 *   signals=none|usr1|term|int|all (comma-separated; default none)
 *   log=stderr|none                watchdog reports
 */
int ppprof_init(const char* config);

/* ppprof_kind returns the kind id of name ("F", "DATA", "OPT_SKIP"...). */
int ppprof_kind(const char* name);

/* ppprof_begin starts a compute op (F, B, W, or a free-form kind). */
ppprof_span ppprof_begin(int h, int kind, int64_t step, int32_t microbatch, int32_t chunk, uint64_t stream);

/* ppprof_end ends a span on stream (or PPPROF_SAME_STREAM); mem_bytes is
 * the device memory allocated now, 0 if unknown. */
int ppprof_end(int h, ppprof_span span, uint64_t stream, int64_t mem_bytes);

/* ppprof_p2p_issue records that a send or receive was posted. shape and
 * dtype may be NULL. */
ppprof_span ppprof_p2p_issue(int h, int kind, int32_t peer, int64_t step, int32_t microbatch, int32_t chunk,
                             int64_t bytes, const char* shape, const char* dtype, uint64_t stream);

/* ppprof_p2p_complete records that the op's wait returned. */
int ppprof_p2p_complete(int h, ppprof_span span, uint64_t stream);

/* ppprof_opt_begin and ppprof_opt_end bracket the optimizer step; a
 * skipped step (skipped != 0) is recorded as OPT_SKIP. */
ppprof_span ppprof_opt_begin(int h, int64_t step, uint64_t stream);
int ppprof_opt_end(int h, ppprof_span span, int skipped);

/* ppprof_step marks the start of a step. */
int ppprof_step(int h, int64_t step);

/* ppprof_set_time sets the time of a recorder on clock=virtual. */
int ppprof_set_time(int h, int64_t ns);

/* ppprof_flush writes the completed ops now. */
int ppprof_flush(int h);

/* ppprof_dump_pending writes the ops in flight (null end) now. */
int ppprof_dump_pending(int h);

/* ppprof_stats_get fills *out with the recorder's counters. */
int ppprof_stats_get(int h, ppprof_stats* out);

/* ppprof_close writes what is left (ops in flight as pending), ends the
 * stream and frees the handle. Recorders still open at exit() are closed
 * by an atexit handler. */
int ppprof_close(int h);

/* ppprof_last_error returns the calling thread's last error message, or
 * "" (never NULL). Valid until the thread's next call. */
const char* ppprof_last_error(void);

#endif /* PPPROF_NO_PROTOTYPES */

#ifdef __cplusplus
}
#endif

#endif /* PPPROF_H */
