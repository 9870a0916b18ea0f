/* A fake "real NCCL" for the drop-in's fallback tests (GNIO_NCCL_FALLBACK): the real one cannot
 * run in CI (no GPU) and refuses two ranks on one GPU anyway. It has the entry points the drop-in
 * binds, keeps the rank and size each communicator was created with, records every call it takes
 * (fake_nccl_record), and writes fake_nccl_marker() over a reduction's output instead of reducing:
 * the test checks that the call, its count, type and operator, and the communicator's rank and
 * size reached it. A pointer that is not one of its communicators is refused (ncclInvalidArgument),
 * so a drop-in communicator passed here by mistake shows.
 *
 * FAKE_NCCL_VERSION (environment) overrides the version it reports; built with
 * FAKE_NCCL_INCOMPLETE it lacks ncclDevCommCreate/ncclDevCommDestroy. */
#include "fake_nccl.h"

#include <nccl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_MAGIC 0x66616b65u

struct FakeComm {
  unsigned magic;
  int rank, nranks;
  int next_op; /* the next user operator's value */
};

struct FakeId {
  char tag[8]; /* "FAKENCCL" */
  unsigned pid, seq;
};

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static char record[1 << 16];
static size_t used;
static char last_error[256];

static void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char* fmt, ...) {
  pthread_mutex_lock(&mutex);
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(record + used, sizeof(record) - used, fmt, args);
  va_end(args);
  if (n > 0 && used + (size_t)n + 1 < sizeof(record)) {
    used += (size_t)n;
    record[used++] = '\n';
    record[used] = '\0';
  }
  pthread_mutex_unlock(&mutex);
}

static ncclResult_t refuse(ncclResult_t r, const char* why) {
  snprintf(last_error, sizeof(last_error), "fake NCCL: %s", why);
  note("refused: %s", why);
  return r;
}

static struct FakeComm* fake(ncclComm_t comm) {
  struct FakeComm* c = (struct FakeComm*)comm;
  return c != NULL && c->magic == FAKE_MAGIC ? c : NULL;
}

/* Bytes per element, in ncclDataType_t's order (int8, uint8, int32, uint32, int64, uint64,
 * float16, float32, float64, bfloat16, fp8 e4m3, fp8 e5m2). */
static size_t bytes_of(ncclDataType_t t) {
  static const unsigned char bytes[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return (unsigned)t < ncclNumTypes ? bytes[t] : 0;
}

const char* fake_nccl_record(void) {
  return record;
}

__attribute__((noinline)) ncclResult_t ncclGetVersion(int* version) {
  const char* v = getenv("FAKE_NCCL_VERSION");
  *version = v != NULL ? atoi(v) : FAKE_NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static unsigned seq;
  struct FakeId f;
  memcpy(f.tag, "FAKENCCL", 8);
  f.pid = (unsigned)getpid();
  f.seq = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &f, sizeof(f));
  note("ncclGetUniqueId id=%u.%u", f.pid, f.seq);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  struct FakeId f;
  memcpy(&f, id.internal, sizeof(f));
  if (memcmp(f.tag, "FAKENCCL", 8) != 0)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: not a unique id of the fake NCCL");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: bad rank or size");
  /* The real NCCL calls its own exported functions too: this one must reach the fake's, not the
   * drop-in's (RTLD_DEEPBIND). */
  int self = 0;
  ncclGetVersion(&self);
  struct FakeComm* c = calloc(1, sizeof(*c));
  c->magic = FAKE_MAGIC;
  c->rank = rank;
  c->nranks = nranks;
  c->next_op = ncclNumOps;
  *comm = (ncclComm_t)c;
  note("ncclCommInitRank nranks=%d rank=%d id=%u.%u self=%d", nranks, rank, f.pid, f.seq,
       self == FAKE_NCCL_VERSION_CODE);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "ncclCommFinalize: not a fake communicator");
  note("ncclCommFinalize rank=%d nranks=%d", c->rank, c->nranks);
  return ncclSuccess;
}

static ncclResult_t end(ncclComm_t comm, const char* call) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "not a fake communicator");
  note("%s rank=%d nranks=%d", call, c->rank, c->nranks);
  c->magic = 0;
  free(c);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return end(comm, "ncclCommDestroy");
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return end(comm, "ncclCommAbort");
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (fake(comm) == NULL)
    return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: not a fake communicator");
  *async_error = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return last_error;
}

/* Every reduction: the marker over `count` elements of `recvbuff` (when `write`). */
static ncclResult_t reduction(const char* call, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              int write) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "reduction on a pointer that is no fake comm");
  if ((int)op >= c->next_op) return refuse(ncclInvalidArgument, "no such user operator");
  if (write)
    memset(recvbuff, fake_nccl_marker((int)op, (int)datatype, c->rank), count * bytes_of(datatype));
  note("%s count=%zu type=%d op=%d root=%d rank=%d nranks=%d", call, count, (int)datatype, (int)op,
       root, c->rank, c->nranks);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  (void)sendbuff;
  (void)stream;
  return reduction("ncclAllReduce", recvbuff, count, datatype, op, -1, comm, 1);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)stream;
  struct FakeComm* c = fake(comm);
  return reduction("ncclReduce", recvbuff, count, datatype, op, root, comm,
                   c != NULL && c->rank == root);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  (void)sendbuff;
  (void)stream;
  return reduction("ncclReduceScatter", recvbuff, recvcount, datatype, op, -1, comm, 1);
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: no fake comm");
  *op = (ncclRedOp_t)c->next_op++;
  const double s = datatype == ncclFloat32 && residence == ncclScalarHostImmediate
                       ? (double)*(const float*)scalar
                       : -1.0;
  note("ncclRedOpCreatePreMulSum op=%d type=%d scalar=%g rank=%d", (int)*op, (int)datatype, s,
       c->rank);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "ncclRedOpDestroy: no fake comm");
  note("ncclRedOpDestroy op=%d rank=%d", (int)op, c->rank);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int flags) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "ncclCommWindowRegister: no fake comm");
  *win = (ncclWindow_t)buff; /* any pointer the test can recognise */
  note("ncclCommWindowRegister size=%zu flags=%d rank=%d", size, flags, c->rank);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "ncclCommWindowDeregister: no fake comm");
  note("ncclCommWindowDeregister win=%s rank=%d", win != NULL ? "set" : "null", c->rank);
  return ncclSuccess;
}

#ifndef FAKE_NCCL_INCOMPLETE
/* nccl_device/core.h's declarations need CUDA's compiler; the fake only needs the pointers. */
struct ncclDevCommRequirements;
struct ncclDevComm;

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* out) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "ncclDevCommCreate: no fake comm");
  memset(out, FAKE_NCCL_DEVCOMM_BYTE, 16);
  note("ncclDevCommCreate reqs=%s rank=%d", reqs != NULL ? "set" : "null", c->rank);
  return ncclSuccess;
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* dev_comm) {
  struct FakeComm* c = fake(comm);
  if (c == NULL) return refuse(ncclInvalidArgument, "ncclDevCommDestroy: no fake comm");
  note("ncclDevCommDestroy devcomm=%s rank=%d",
       *(const unsigned char*)dev_comm == FAKE_NCCL_DEVCOMM_BYTE ? "ours" : "other", c->rank);
  return ncclSuccess;
}
#endif
