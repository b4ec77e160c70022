/* Status names, the thread-local description of the last failure, the log
 * (where the diagnostics that the environment asks for go) and what a
 * trace says. */
#ifndef KILN_ERROR_H
#define KILN_ERROR_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include <stdio.h>

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

/* "KILN_ERR_NO_DEVICE" for KILN_ERR_NO_DEVICE; "KILN_UNKNOWN_STATUS" for a
 * value outside the table. Static storage; thread-safe. */
KILN_API const char *kiln_status_name(kiln_status status);

/* A short English description of status ("no device matches"). Static
 * storage; thread-safe. */
KILN_API const char *kiln_status_string(kiln_status status);

/* The message describing the last failure of a kiln call on this thread: the
 * failing OpenCL call and its error name, the device, a hint and, for build
 * failures, an excerpt of the build log. Never NULL ("" when no call has
 * failed). Owned by kiln; valid until this thread's next kiln call.
 * Successful calls do not clear it. Thread-safe (per-thread storage). */
KILN_API const char *kiln_last_error(void);

/* The status of the last failure on this thread (KILN_OK if none). */
KILN_API kiln_status kiln_last_status(void);

/* The raw OpenCL error code behind the last failure on this thread, or 0 when
 * the failure did not come from an OpenCL call. */
KILN_API int32_t kiln_last_cl_error(void);

/* Forget the last failure on this thread. */
KILN_API void kiln_clear_error(void);

/* Record a failure on this thread, as kiln's own calls do, so that a library
 * layered on kiln (kiln_mpi) reports through the same kiln_last_error() and
 * kiln_last_status(); kiln_last_cl_error() becomes 0. Returns status, so a
 * caller may write `return kiln_set_last_error(KILN_ERR_..., msg);`.
 * message is copied (truncated to 4095 bytes). A status that is not an
 * error (KILN_OK, or a value outside kiln_status) is refused with
 * KILN_ERR_INVALID_ARGUMENT, a NULL message with KILN_ERR_NULL_POINTER; both
 * record that refusal as the last error instead. Thread-safe. */
KILN_API kiln_status kiln_set_last_error(kiln_status status,
                                         const char *message);

/* The name of an OpenCL error code as spelled in the Khronos headers
 * ("CL_INVALID_VALUE", "CL_PLATFORM_NOT_FOUND_KHR" for -1001), or
 * "CL_UNKNOWN_ERROR" for a code no header defines. Static storage. */
KILN_API const char *kiln_cl_error_name(int32_t cl_error);

/* What kiln's trace and log have to say that nobody received, or "" when
 * nothing: first why KILN_TRACE produces no trace in this process (the
 * file could not be opened, or another process holds it: two processes on
 * one path, the second writes nothing; put "%p" in the path, which becomes
 * the process id, for one file each); then, when no log handler is
 * installed (kiln_log_set_handler), the last four messages of kiln's log
 * (KILN_LOG) that were kept instead of printed, oldest first, each on a
 * line of its own after its level ("warning: program cache: ..."), the
 * trace's problem not repeated. Tracing never fails the work it records and
 * kiln never prints, so this and the handler are where their problems
 * show. Owned by kiln; valid until this thread's next call of it.
 * Thread-safe. */
KILN_API const char *kiln_trace_diagnostic(void);

/* Write to out the table of what ran that KILN_TRACE_SUMMARY delivers at
 * a program's exit, computed from the trace file at path that KILN_TRACE
 * wrote (docs/tracing.md): a line "N kinds of work, T ms in all", then the
 * ops, kernels, transfers and builds by total time with their calls, mean
 * time, MB moved, GB/s and GFLOP/s, one row each, fitted to width columns
 * (0: no limit; the numbers take 59, a name that does not fit goes on a
 * line of its own). A trace streamed to a pipe, without its closing
 * bracket, is read too. On an error nothing is written: KILN_ERR_IO when
 * path cannot be read (or is not a regular file), KILN_ERR_CORRUPT when it
 * holds no kiln trace (empty, not JSON, cut short, JSON of another kind,
 * or trace events of another program), with the reason in
 * kiln_last_error();
 * KILN_ERR_NULL_POINTER for a NULL path or out. Thread-safe. */
KILN_API kiln_status kiln_trace_summarize(const char *path, FILE *out,
                                          size_t width);

/* The levels of kiln's log (KILN_LOG=off|error|warn|info|debug). */
typedef enum kiln_log_level {
  KILN_LOG_OFF = 0,   /* as a threshold: nothing */
  KILN_LOG_ERROR = 1, /* kiln could not do something it was asked to */
  KILN_LOG_WARN = 2,  /* an unusable cache, an unwritable trace, ... */
  KILN_LOG_INFO = 3,  /* a skipped tuning file or platform; the summary */
  KILN_LOG_DEBUG = 4,
} kiln_log_level;

/* Receives one message of kiln's log: its level and its text, one line
 * without the newline (KILN_TRACE_SUMMARY's table, at level info, is one
 * message of several lines), valid during the call only. */
typedef void (*kiln_log_fn)(kiln_log_level level, const char *message,
                            void *user_data);

/* Route kiln's log to handler (with user_data); NULL returns to the
 * default. kiln never prints; install a handler, as the kiln tool does, to
 * show its messages. Without one, the messages the environment asks for
 * (KILN_LOG, KILN_TRACE, KILN_TRACE_SUMMARY; docs/tracing.md) are kept, the
 * last four readable through kiln_trace_diagnostic(), and
 * KILN_TRACE_SUMMARY=1's table goes nowhere (=PATH writes it to a file
 * either way). With a handler, the handler receives every message at or
 * above KILN_LOG's level (warn when KILN_LOG is unset) and
 * KILN_TRACE_SUMMARY=1's table at exit, and none is kept: a handler that
 * does nothing silences kiln. It is called one message at a time, from whichever thread logs (an OpenCL
 * driver's callback thread included), and from kiln's exit-time destructor
 * for the summary: it must not call kiln, and it must stay callable until
 * the process exits or another call replaces it. Thread-safe. */
KILN_API void kiln_log_set_handler(kiln_log_fn handler, void *user_data);

/* kiln's version string, "MAJOR.MINOR.PATCH", of the library actually loaded
 * (compare with KILN_VERSION_STRING from the headers compiled against). */
KILN_API const char *kiln_version(void);

KILN_END_DECLS

#endif
