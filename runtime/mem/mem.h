/* The mem room's interface (runtime/mem/): memory services over the core
 * objects: the per-context pool (pool.c), pinned host memory (pinned.c),
 * staged transfers and copies between devices (staging.c) and the
 * double-buffered pipeline (pipeline.c). Included by the rooms above it
 * (program, tune, ops, multi); it includes only the core room below. Not
 * installed. */
#ifndef KILN_MEM_ROOM_H
#define KILN_MEM_ROOM_H

#include "core/internal.h"

/* ---- staging (staging.c) ------------------------------------------------ */

/* Copy size bytes of src at src_offset (of the staging ring's context,
 * read on its queue) into dst at dst_offset (of any context, written on
 * dst_queue) through the ring: the read of chunk k+1 overlaps the write of
 * chunk k. Blocking; ranges checked by the caller. On failure *call names
 * the OpenCL call that failed. */
cl_int kiln__staging_peer_copy(kiln_staging *staging, kiln_buffer *src,
                               size_t src_offset, cl_command_queue dst_queue,
                               kiln_buffer *dst, size_t dst_offset,
                               size_t size, const char **call);

#endif
