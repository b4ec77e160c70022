/* Recorded command sequences (kiln_sequence.h).
 *
 * A sequence is the recorder of its queue while it records (struct
 * kiln__recorder, which the core room and the op library call). Each
 * captured launch keeps a clone of the kernel (clCloneKernel copies the
 * arguments as set at that moment), so the queue's op kernels and the
 * caller's kernels stay free to take new arguments. Replay enqueues the
 * clones, or one command buffer built from them (where offered and not
 * known to be slower: KILN_QUIRK_SLOW_COMMAND_BUFFER). PoCL 3.1 offers
 * cl_khr_command_buffer with simultaneous use, without mutable dispatch: a
 * changed argument makes the command buffer be built again before the next
 * replay. */
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

/* The cl_khr_command_buffer entry points, looked up per platform. */
struct command_buffer_fns {
  clCreateCommandBufferKHR_fn create;
  clCommandNDRangeKernelKHR_fn ndrange;
  clFinalizeCommandBufferKHR_fn finalize;
  clEnqueueCommandBufferKHR_fn enqueue;
  clReleaseCommandBufferKHR_fn release;
};

struct launch {
  cl_kernel kernel; /* clone with its arguments */
  cl_uint dims;
  size_t global[3];
  size_t local[3];
  bool has_local;
  /* kiln_kernel_launch only (else num_args 0): what set_arg checks. */
  uint32_t num_args;
  struct kiln__kernel_arg *args;
  bool arg_info;
  char *name;
};

struct kiln_sequence {
  struct kiln__recorder rec; /* first: the queue holds &rec */
  kiln_context *ctx;
  kiln_queue *recording_on;  /* while recording */
  cl_command_queue queue;    /* retained: replays go there */
  bool profiled;             /* the queue has KILN_QUEUE_PROFILING */
  unsigned flags;
  struct launch *launches;
  size_t count, capacity;
  kiln_buffer **buffers; /* each counted in its recordings */
  size_t num_buffers, buffer_capacity;
  cl_mem *mems; /* retained op scratch */
  size_t num_mems, mem_capacity;
  struct command_buffer_fns fns;
  bool use_command_buffer;
  cl_command_buffer_khr command_buffer; /* built lazily; NULL when stale */
};

/* Grow *items (of size item) to hold one more than count. */
static bool grow(void **items, size_t *capacity, size_t count, size_t item) {
  if (count < *capacity)
    return true;
  size_t want = *capacity ? 2 * *capacity : 16;
  void *bigger = realloc(*items, want * item);
  if (bigger == NULL)
    return false;
  *items = bigger;
  *capacity = want;
  return true;
}

static kiln_status use_buffer(struct kiln__recorder *self,
                              kiln_buffer *buffer) {
  kiln_sequence *seq = (kiln_sequence *)self;
  for (size_t i = 0; i < seq->num_buffers; i++)
    if (seq->buffers[i] == buffer)
      return KILN_OK;
  if (!grow((void **)&seq->buffers, &seq->buffer_capacity, seq->num_buffers,
            sizeof *seq->buffers))
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "recording a sequence: out of host memory");
  atomic_fetch_add(&buffer->recordings, 1);
  seq->buffers[seq->num_buffers++] = buffer;
  return KILN_OK;
}

static kiln_status use_mem(struct kiln__recorder *self, cl_mem mem) {
  kiln_sequence *seq = (kiln_sequence *)self;
  for (size_t i = 0; i < seq->num_mems; i++)
    if (seq->mems[i] == mem)
      return KILN_OK;
  if (!grow((void **)&seq->mems, &seq->mem_capacity, seq->num_mems,
            sizeof *seq->mems))
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "recording a sequence: out of host memory");
  clRetainMemObject(mem);
  seq->mems[seq->num_mems++] = mem;
  return KILN_OK;
}

static kiln_status record(struct kiln__recorder *self, cl_kernel kernel,
                          const kiln_kernel *user, cl_uint dims,
                          const size_t *global, const size_t *local) {
  kiln_sequence *seq = (kiln_sequence *)self;
  if (!grow((void **)&seq->launches, &seq->capacity, seq->count,
            sizeof *seq->launches))
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "recording a sequence: out of host memory");
  struct launch l = {.dims = dims, .has_local = local != NULL};
  for (cl_uint d = 0; d < dims; d++) {
    l.global[d] = global[d];
    l.local[d] = local != NULL ? local[d] : 0;
  }
  if (user != NULL) {
    l.num_args = user->num_args;
    l.arg_info = user->arg_info;
    l.args = malloc((user->num_args + 1) * sizeof *l.args);
    l.name = strdup(user->name);
    if (l.args == NULL || l.name == NULL) {
      free(l.args);
      free(l.name);
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "recording a sequence: out of host memory");
    }
    memcpy(l.args, user->args, user->num_args * sizeof *l.args);
  }
  cl_int err = CL_SUCCESS;
  l.kernel = clCloneKernel(kernel, &err);
  if (err != CL_SUCCESS || l.kernel == NULL) {
    free(l.args);
    free(l.name);
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_HOST_MEMORY,
                         "clCloneKernel", seq->ctx->device,
                         "recording launch %zu of a sequence", seq->count);
  }
  seq->launches[seq->count++] = l;
  return KILN_OK;
}

kiln_status kiln_sequence_begin(kiln_queue *queue, unsigned flags,
                                kiln_sequence **out) {
  static const char fn[] = "kiln_sequence_begin";
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  const unsigned known =
      KILN_SEQUENCE_COMMAND_BUFFER | KILN_SEQUENCE_PREPARED_LIST;
  if ((flags & ~known) != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: flags has unknown bits 0x%x (known: "
                      "KILN_SEQUENCE_COMMAND_BUFFER, "
                      "KILN_SEQUENCE_PREPARED_LIST)",
                      fn, flags & ~known);
  if (flags == known)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: flags has both KILN_SEQUENCE_COMMAND_BUFFER and "
                      "KILN_SEQUENCE_PREPARED_LIST; pass at most one",
                      fn);
  if (queue->recorder != NULL)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "%s: the queue already records a sequence; end it "
                      "first",
                      fn);
  kiln_sequence *seq = calloc(1, sizeof *seq);
  if (seq == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                      fn);
  seq->rec.launch = record;
  seq->rec.use_buffer = use_buffer;
  seq->rec.use_mem = use_mem;
  seq->ctx = queue->ctx;
  seq->queue = queue->cl;
  seq->profiled = (queue->flags & KILN_QUEUE_PROFILING) != 0;
  clRetainCommandQueue(seq->queue);
  seq->flags = flags;
  seq->recording_on = queue;
  queue->recorder = &seq->rec;
  kiln__context_child_added(seq->ctx);
  *out = seq;
  return KILN_OK;
}

/* An extension entry point into *fn_out (a function pointer): copied, as
 * ISO C has no conversion from the void * the loader returns. */
static void lookup(cl_platform_id platform, const char *name, void *fn_out) {
  void *address = clGetExtensionFunctionAddressForPlatform(platform, name);
  memcpy(fn_out, &address, sizeof address);
}

/* Whether the device offers command buffers that may be enqueued again
 * while pending, and their entry points. */
static bool find_command_buffers(kiln_sequence *seq) {
  cl_device_id dev = seq->ctx->device->id;
  size_t size = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &size) !=
          CL_SUCCESS ||
      size == 0)
    return false;
  char *ext = malloc(size + 1);
  if (ext == NULL)
    return false;
  bool offered = false;
  if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, size, ext, NULL) ==
      CL_SUCCESS) {
    ext[size] = '\0';
    /* Whole words only: cl_khr_command_buffer_mutable_dispatch is another. */
    for (char *w = strtok(ext, " \t\n"); w != NULL; w = strtok(NULL, " \t\n"))
      offered = offered || strcmp(w, "cl_khr_command_buffer") == 0;
  }
  free(ext);
  cl_device_command_buffer_capabilities_khr caps = 0;
  if (!offered ||
      clGetDeviceInfo(dev, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
                      sizeof caps, &caps, NULL) != CL_SUCCESS ||
      (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR) == 0)
    return false;
  cl_platform_id p = seq->ctx->device->platform;
  lookup(p, "clCreateCommandBufferKHR", &seq->fns.create);
  lookup(p, "clCommandNDRangeKernelKHR", &seq->fns.ndrange);
  lookup(p, "clFinalizeCommandBufferKHR", &seq->fns.finalize);
  lookup(p, "clEnqueueCommandBufferKHR", &seq->fns.enqueue);
  lookup(p, "clReleaseCommandBufferKHR", &seq->fns.release);
  return seq->fns.create && seq->fns.ndrange && seq->fns.finalize &&
         seq->fns.enqueue && seq->fns.release;
}

/* Build the command buffer from the launches; false (and the list is used
 * from then on) when the driver refuses any step. */
static bool build_command_buffer(kiln_sequence *seq) {
  cl_command_buffer_properties_khr props[] = {
      CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
  cl_int err = CL_SUCCESS;
  cl_command_buffer_khr cb = seq->fns.create(1, &seq->queue, props, &err);
  if (err != CL_SUCCESS || cb == NULL)
    return false;
  for (size_t i = 0; i < seq->count && err == CL_SUCCESS; i++) {
    const struct launch *l = &seq->launches[i];
    err = seq->fns.ndrange(cb, NULL, NULL, l->kernel, l->dims, NULL, l->global,
                           l->has_local ? l->local : NULL, 0, NULL, NULL,
                           NULL);
  }
  if (err == CL_SUCCESS)
    err = seq->fns.finalize(cb);
  if (err != CL_SUCCESS) {
    seq->fns.release(cb);
    return false;
  }
  seq->command_buffer = cb;
  return true;
}

/* The flags, else the profile: command buffers unless it knows them slow. */
static bool wants_command_buffer(const kiln_sequence *seq) {
  if (seq->flags & KILN_SEQUENCE_COMMAND_BUFFER)
    return true;
  if (seq->flags & KILN_SEQUENCE_PREPARED_LIST)
    return false;
  return (seq->ctx->device->info.quirks & KILN_QUIRK_SLOW_COMMAND_BUFFER) == 0;
}

kiln_status kiln_sequence_end(kiln_sequence *seq) {
  if (seq == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_sequence_end: seq is NULL");
  if (seq->recording_on == NULL)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "kiln_sequence_end: the sequence is not recording");
  seq->recording_on->recorder = NULL;
  seq->recording_on = NULL;
  seq->use_command_buffer = wants_command_buffer(seq) && seq->count > 0 &&
                            find_command_buffers(seq) &&
                            build_command_buffer(seq);
  return KILN_OK;
}

kiln_status kiln_sequence_destroy(kiln_sequence *seq) {
  if (seq == NULL)
    return KILN_OK;
  if (seq->recording_on != NULL)
    seq->recording_on->recorder = NULL;
  if (seq->command_buffer != NULL)
    seq->fns.release(seq->command_buffer);
  for (size_t i = 0; i < seq->count; i++) {
    clReleaseKernel(seq->launches[i].kernel);
    free(seq->launches[i].args);
    free(seq->launches[i].name);
  }
  for (size_t i = 0; i < seq->num_buffers; i++)
    atomic_fetch_sub(&seq->buffers[i]->recordings, 1);
  for (size_t i = 0; i < seq->num_mems; i++)
    clReleaseMemObject(seq->mems[i]);
  clReleaseCommandQueue(seq->queue);
  kiln__context_child_removed(seq->ctx);
  free(seq->launches);
  free(seq->buffers);
  free(seq->mems);
  free(seq);
  return KILN_OK;
}

size_t kiln_sequence_get_launch_count(const kiln_sequence *seq) {
  return seq != NULL ? seq->count : 0;
}

bool kiln_sequence_uses_command_buffer(const kiln_sequence *seq) {
  return seq != NULL && seq->use_command_buffer;
}

/* The checks both setters share; *out is the launch. */
static kiln_status check_set(const char *fn, kiln_sequence *seq, size_t launch,
                             uint32_t arg, struct launch **out) {
  if (seq == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: seq is NULL", fn);
  if (seq->recording_on != NULL)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "%s: the sequence is still recording; call "
                      "kiln_sequence_end first",
                      fn);
  if (launch >= seq->count)
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s: launch %zu is not below the %zu recorded", fn,
                      launch, seq->count);
  struct launch *l = &seq->launches[launch];
  if (l->name == NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: launch %zu is an op's; only launches recorded by "
                      "kiln_kernel_launch take new arguments",
                      fn, launch);
  if (arg >= l->num_args)
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s: arg %u is not below the %u arguments of kernel "
                      "'%s' (launch %zu)",
                      fn, arg, l->num_args, l->name, launch);
  *out = l;
  return KILN_OK;
}

/* Set the argument on the clone; the command buffer is stale from now. */
static kiln_status set_clone_arg(const char *fn, kiln_sequence *seq,
                                 struct launch *l, uint32_t arg, size_t size,
                                 const void *value) {
  cl_int err = clSetKernelArg(l->kernel, arg, size, value);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clSetKernelArg", seq->ctx->device,
                         "%s: argument %u of kernel '%s' (%zu bytes)", fn, arg,
                         l->name, size);
  if (seq->command_buffer != NULL) {
    seq->fns.release(seq->command_buffer);
    seq->command_buffer = NULL;
  }
  return KILN_OK;
}

kiln_status kiln_sequence_set_arg_buffer(kiln_sequence *seq, size_t launch,
                                         uint32_t arg, kiln_buffer *buffer) {
  static const char fn[] = "kiln_sequence_set_arg_buffer";
  struct launch *l = NULL;
  kiln_status s = check_set(fn, seq, launch, arg, &l);
  if (s != KILN_OK)
    return s;
  if (buffer == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: buffer is NULL", fn);
  if (buffer->ctx != seq->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: buffer belongs to another context than the "
                      "sequence",
                      fn);
  unsigned address = l->args[arg].address;
  if (l->arg_info && address != CL_KERNEL_ARG_ADDRESS_GLOBAL &&
      address != CL_KERNEL_ARG_ADDRESS_CONSTANT)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: argument %u of kernel '%s' is declared '%s', not a "
                      "__global or __constant pointer",
                      fn, arg, l->name, l->args[arg].type);
  s = use_buffer(&seq->rec, buffer);
  if (s != KILN_OK)
    return s;
  return set_clone_arg(fn, seq, l, arg, sizeof(cl_mem), &buffer->cl);
}

kiln_status kiln_sequence_set_arg_scalar(kiln_sequence *seq, size_t launch,
                                         uint32_t arg, const void *value,
                                         size_t size_bytes) {
  static const char fn[] = "kiln_sequence_set_arg_scalar";
  struct launch *l = NULL;
  kiln_status s = check_set(fn, seq, launch, arg, &l);
  if (s != KILN_OK)
    return s;
  if (value == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: value is NULL", fn);
  const struct kiln__kernel_arg *a = &l->args[arg];
  if (l->arg_info && a->address != CL_KERNEL_ARG_ADDRESS_PRIVATE)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: argument %u of kernel '%s' is a pointer ('%s'); "
                      "use kiln_sequence_set_arg_buffer",
                      fn, arg, l->name, a->type);
  if (a->size != 0 && a->size != size_bytes)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: size_bytes %zu does not match the %zu bytes of "
                      "argument %u ('%s') of kernel '%s'",
                      fn, size_bytes, a->size, arg, a->type, l->name);
  return set_clone_arg(fn, seq, l, arg, size_bytes, value);
}

/* Enqueue the prepared list: the first launch waits, the last gives ev. */
static cl_int replay_list(kiln_sequence *seq, cl_uint num_wait,
                          const cl_event *waits, cl_event *ev) {
  if (seq->count == 0)
    return clEnqueueMarkerWithWaitList(seq->queue, num_wait,
                                       num_wait ? waits : NULL, ev);
  for (size_t i = 0; i < seq->count; i++) {
    const struct launch *l = &seq->launches[i];
    cl_uint nw = i == 0 ? num_wait : 0;
    cl_int err = clEnqueueNDRangeKernel(
        seq->queue, l->kernel, l->dims, NULL, l->global,
        l->has_local ? l->local : NULL, nw, nw ? waits : NULL,
        i + 1 == seq->count ? ev : NULL);
    if (err != CL_SUCCESS)
      return err;
  }
  return CL_SUCCESS;
}

kiln_status kiln_sequence_replay(kiln_sequence *seq, size_t num_wait,
                                 kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_sequence_replay";
  if (out_event != NULL)
    *out_event = NULL;
  if (seq == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: seq is NULL", fn);
  if (seq->recording_on != NULL)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "%s: the sequence is still recording; call "
                      "kiln_sequence_end first",
                      fn);
  if (num_wait > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: num_wait %zu is too large",
                      fn, num_wait);
  cl_event inline_buf[KILN__WAIT_INLINE], *waits = NULL;
  kiln_status s = kiln__wait_list_cl(seq->ctx, num_wait, wait_list,
                                     inline_buf, &waits);
  if (s != KILN_OK)
    return s;
  bool traced = kiln__trace_enabled();
  uint64_t host_ns = traced ? kiln__now_ns() : 0;
  cl_event ev = NULL;
  cl_event *ev_out = out_event != NULL || traced ? &ev : NULL;
  if (seq->use_command_buffer && seq->command_buffer == NULL &&
      !build_command_buffer(seq))
    seq->use_command_buffer = false;
  const char *call = "clEnqueueNDRangeKernel";
  cl_int err;
  if (seq->use_command_buffer) {
    call = "clEnqueueCommandBufferKHR";
    err = seq->fns.enqueue(0, NULL, seq->command_buffer, (cl_uint)num_wait,
                           num_wait ? waits : NULL, ev_out);
  } else {
    err = replay_list(seq, (cl_uint)num_wait, waits, ev_out);
  }
  kiln__wait_list_free(waits, inline_buf);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, call, seq->ctx->device,
                         "%s: %zu recorded launches", fn, seq->count);
  if (traced && ev != NULL)
    kiln__trace_cl_commands(
        seq->ctx, seq->queue, "kiln.op", "sequence.replay",
        json_pack("{s:f, s:b}", "launches", (double)seq->count,
                  "command_buffer", seq->use_command_buffer),
        ev, ev, host_ns);
  if (out_event == NULL) {
    if (ev != NULL)
      clReleaseEvent(ev);
    return KILN_OK;
  }
  return kiln__event_wrap_cl(seq->ctx, seq->profiled, ev, out_event);
}
