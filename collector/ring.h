/*
 * ring.h: the recorder's ring buffer as C sees it. The Go types slot,
 * devSlot and ringCtl (collector/ring.go) have the same layout (a test
 * checks every offset); with cgo the ring lives in C memory, so that the C
 * ABI's hot path (collector/capi/hot.c) records without entering Go.
 *
 * Protocol (see ring.go): a producer claims seq with a CAS on next (full
 * when next - head >= size), fills the slot, and publishes
 * tag = seq<<3 | OPEN; End moves OPEN -> ENDING with a CAS, fills the end,
 * and publishes DONE (or ENDED when CUDA events must be resolved).
 */
#ifndef PPPROF_RING_H
#define PPPROF_RING_H

#include <stdint.h>

#define PPC_ST_FREE 0
#define PPC_ST_OPEN 1
#define PPC_ST_ENDING 2
#define PPC_ST_ENDED 3
#define PPC_ST_DONE 4
#define PPC_ST_ABANDONED 5

#define PPC_FLAG_HOST_ONLY 1
#define PPC_FLAG_END_HOST 2
#define PPC_FLAG_GO_STRINGS 4

#define PPC_CLOCK_HOST 0
#define PPC_CLOCK_VIRTUAL 1
#define PPC_CLOCK_CUDA 2

#define PPC_MAX_KINDS 8192

typedef struct ppc_slot {
	uint64_t tag;
	int64_t issue_ns;
	int64_t start_ns;
	int64_t step;
	int64_t bytes;
	int64_t tokens;
	double flops;
	int64_t end_ns;
	int64_t mem_bytes;
	uint32_t shape; /* label ids: 0 is "" */
	uint32_t dtype;
	int32_t mb;
	int32_t chunk;
	int32_t peer;
	uint16_t kind;
	uint16_t end_kind;
	uint8_t flags;
	uint8_t pad[31];
} ppc_slot; /* 128 bytes */

typedef struct ppc_dev {
	uint64_t stream;
	uint64_t start_ev;
	uint64_t end_ev;
} ppc_dev;

typedef struct ppc_ctl {
	uint64_t next; /* producers */
	uint8_t pad0[56];
	uint64_t head; /* the writer */
	uint8_t pad1[56];
	int32_t closed;
	int32_t inflight;
	int64_t dropped;
	int64_t rejected;
	int64_t dev_errors;
	uint64_t virtual_ptr; /* int64_t* of the virtual clock (C memory), 0 unless clock is virtual */
	uint64_t mask;
	uint64_t size;
	int32_t rank;
	int32_t clock;       /* PPC_CLOCK_* */
	int64_t mono_offset; /* host ns = mono_offset + CLOCK_MONOTONIC ns */
	uint64_t cuda;       /* the CUDA function table (ppc_api*), 0 unless clock is CUDA */
	uint64_t slots;      /* ppc_slot* */
	uint64_t dev;        /* ppc_dev*, 0 unless clock is CUDA */
} ppc_ctl;

#endif
