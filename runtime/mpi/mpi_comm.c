/* The kiln_mpi object: a private duplicate of the caller's communicator that
 * returns errors instead of aborting, the node-local rank, the device a rank
 * takes, and the error and timeout helpers of the other files. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <time.h>

#include "mpi_internal.h"

#define DEFAULT_CHUNK_BYTES ((size_t)4 << 20)
#define DEFAULT_SLOTS 4
/* One chunk goes to MPI as one message counted in int elements. */
#define MAX_CHUNK_BYTES ((size_t)1 << 30)

kiln_status kiln__mpi_error(kiln_status status, const char *fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  return kiln_set_last_error(status, text);
}

kiln_status kiln__mpi_fail(const kiln_mpi *mpi, const char *fn,
                           const char *call, int mpi_error) {
  char text[MPI_MAX_ERROR_STRING + 1] = "";
  int length = 0;
  if (MPI_Error_string(mpi_error, text, &length) != MPI_SUCCESS)
    snprintf(text, sizeof text, "MPI error code %d", mpi_error);
  if (mpi != NULL)
    return kiln__mpi_error(KILN_ERR_COMM, "%s: %s failed on rank %d of %d: %s",
                           fn, call, mpi->rank, mpi->size, text);
  return kiln__mpi_error(KILN_ERR_COMM, "%s: %s failed: %s", fn, call, text);
}

double kiln__mpi_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void kiln__mpi_pause(unsigned *idle_rounds) {
  /* MPI advances non-blocking collectives only inside MPI calls, so the
   * caller polls. The first rounds only yield the core (an exchange of a
   * small chunk completes within microseconds, and a sleep would cost
   * tens), later ones sleep, leaving the cores to the other ranks and the
   * device threads during a long wait. */
  if ((*idle_rounds)++ < 200) {
    sched_yield();
    return;
  }
  struct timespec pause = {0, 20000};
  nanosleep(&pause, NULL);
}

kiln_status kiln__mpi_wait_one(kiln_mpi *mpi, const char *fn, const char *what,
                               MPI_Request *request) {
  double start = kiln__mpi_now();
  unsigned idle_rounds = 0;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      mpi->broken = true;
      return kiln__mpi_fail(mpi, fn, "MPI_Test", rc);
    }
    if (done)
      return KILN_OK;
    if (mpi->timeout_s > 0 && kiln__mpi_now() - start > mpi->timeout_s) {
      mpi->broken = true;
      return kiln__mpi_error(
          KILN_ERR_COMM,
          "%s: rank %d of %d waited %.3g s for the other ranks (%s) and "
          "gave up (kiln_mpi_options.timeout_s): a rank died, hangs or "
          "never called this collective; this kiln_mpi can no longer be "
          "used",
          fn, mpi->rank, mpi->size, mpi->timeout_s, what);
    }
    kiln__mpi_pause(&idle_rounds);
  }
}

kiln_status kiln_mpi_create(MPI_Comm comm, const kiln_mpi_options *options,
                            kiln_mpi **out) {
  static const char fn[] = "kiln_mpi_create";
  if (out == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (!initialised || finalised)
    return kiln__mpi_error(KILN_ERR_INVALID_STATE,
                           "%s: MPI is not initialised (call MPI_Init first)"
                           "%s", fn, finalised ? " or already finalised" : "");
  if (comm == MPI_COMM_NULL)
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: comm is MPI_COMM_NULL", fn);
  kiln_mpi_options opt = {0};
  if (options != NULL)
    opt = *options;
  if (opt.chunk_bytes == 0)
    opt.chunk_bytes = DEFAULT_CHUNK_BYTES;
  if (opt.slots == 0)
    opt.slots = DEFAULT_SLOTS;
  if (opt.chunk_bytes > MAX_CHUNK_BYTES)
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: options->chunk_bytes %zu is over the limit "
                           "of %zu (one chunk is one MPI message)",
                           fn, opt.chunk_bytes, MAX_CHUNK_BYTES);
  if (opt.slots < 2 || opt.slots > 64)
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: options->slots %zu is outside 2..64", fn,
                           opt.slots);
  if (!(opt.timeout_s >= 0)) /* also refuses NaN */
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: options->timeout_s %g is negative or NaN", fn,
                           opt.timeout_s);

  kiln_mpi *mpi = calloc(1, sizeof *mpi);
  if (mpi == NULL)
    return kiln__mpi_error(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory",
                           fn);
  mpi->comm = MPI_COMM_NULL;
  mpi->data = MPI_COMM_NULL;
  mpi->chunk_bytes = opt.chunk_bytes;
  mpi->slots = opt.slots;
  mpi->timeout_s = opt.timeout_s;
  MPI_Comm local = MPI_COMM_NULL;
  const char *call = "MPI_Comm_dup";
  /* The duplicate keeps kiln's messages apart from the caller's, and its
   * error handler is ours to set. */
  int rc = MPI_Comm_dup(comm, &mpi->comm);
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_set_errhandler";
    rc = MPI_Comm_set_errhandler(mpi->comm, MPI_ERRORS_RETURN);
  }
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_dup";
    rc = MPI_Comm_dup(mpi->comm, &mpi->data);
  }
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_set_errhandler";
    rc = MPI_Comm_set_errhandler(mpi->data, MPI_ERRORS_RETURN);
  }
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_rank";
    rc = MPI_Comm_rank(mpi->comm, &mpi->rank);
  }
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_size";
    rc = MPI_Comm_size(mpi->comm, &mpi->size);
  }
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_split_type";
    rc = MPI_Comm_split_type(mpi->comm, MPI_COMM_TYPE_SHARED, mpi->rank,
                             MPI_INFO_NULL, &local);
  }
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_rank";
    rc = MPI_Comm_rank(local, &mpi->local_rank);
  }
  if (rc == MPI_SUCCESS) {
    call = "MPI_Comm_size";
    rc = MPI_Comm_size(local, &mpi->local_size);
  }
  if (local != MPI_COMM_NULL)
    MPI_Comm_free(&local);
  if (rc != MPI_SUCCESS) {
    kiln_status status = kiln__mpi_fail(NULL, fn, call, rc);
    if (mpi->data != MPI_COMM_NULL)
      MPI_Comm_free(&mpi->data);
    if (mpi->comm != MPI_COMM_NULL)
      MPI_Comm_free(&mpi->comm);
    free(mpi);
    return status;
  }
  *out = mpi;
  return KILN_OK;
}

kiln_status kiln_mpi_destroy(kiln_mpi *mpi) {
  if (mpi == NULL)
    return KILN_OK;
  if (mpi->live_requests > 0)
    return kiln__mpi_error(KILN_ERR_BUSY,
                           "kiln_mpi_destroy: %d request(s) started on it "
                           "have not been waited for (kiln_mpi_wait)",
                           mpi->live_requests);
  /* After a timeout MPI may still write into the staging memory: leave it.
   * MPI_Comm_free only marks the communicator; MPI frees it once its
   * pending operations complete, so it is safe either way. */
  if (!mpi->broken)
    free(mpi->stage);
  MPI_Comm_free(&mpi->data);
  MPI_Comm_free(&mpi->comm);
  free(mpi);
  return KILN_OK;
}

int kiln_mpi_get_rank(const kiln_mpi *mpi) { return mpi ? mpi->rank : -1; }
int kiln_mpi_get_size(const kiln_mpi *mpi) { return mpi ? mpi->size : -1; }
int kiln_mpi_get_local_rank(const kiln_mpi *mpi) {
  return mpi ? mpi->local_rank : -1;
}
int kiln_mpi_get_local_size(const kiln_mpi *mpi) {
  return mpi ? mpi->local_size : -1;
}

kiln_status kiln_mpi_select_device(const kiln_mpi *mpi,
                                   const kiln_device_list *list,
                                   const char *selector,
                                   const kiln_device **out) {
  static const char fn[] = "kiln_mpi_select_device";
  if (out == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (mpi == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: mpi is NULL", fn);
  if (list == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: list is NULL", fn);
  kiln_selection *selection = NULL;
  kiln_status status = kiln_selection_create(list, selector, &selection);
  if (status != KILN_OK)
    return status; /* the selector's own message says what is wrong */
  size_t taken = kiln_selection_get_count(selection);
  if (taken == 0) {
    status = kiln__mpi_error(KILN_ERR_NO_DEVICE,
                             "%s: selector '%s' takes no device on rank %d", fn,
                             kiln_selection_get_selector(selection), mpi->rank);
  } else {
    *out = kiln_selection_get(selection, (size_t)mpi->local_rank % taken);
  }
  kiln_selection_destroy(selection);
  return status;
}
