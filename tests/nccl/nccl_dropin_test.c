/* An NCCL program in C, compiled against nccl.h only (no gnio header), run through
 * libgnio_nccl.so on the host backend: every collective (several types and operators), grouped
 * send/recv (a ring and an all-to-all), gather/scatter, split, shrink, abort, the queries, and the
 * calls gnio refuses (which must fail with a reason, never succeed silently). Every element is
 * checked against a value computed here; outputs are poisoned first.
 *
 *   gnio-run -n 3 -- nccl_dropin_test
 *   GNIO_NCCL_FALLBACK=libnccl_fake.so gnio-run -n 3 -- nccl_dropin_test --fallback
 *   gnio-run -n 2 -- nccl_dropin_test --bad-fallback libnccl_fake.so libnccl_fake_incomplete.so
 *
 * --fallback: what gnio does not carry reaches the fake NCCL (fake_nccl.c) with its arguments and
 * the communicator's rank and size, one log line per kind; the rest still runs on gnio.
 * --bad-fallback: a fallback that cannot be loaded fails communicator creation with the reason.
 *
 * The unique id travels through a file named after gnio-run's job token. Exit 0 when every check
 * passed on this rank. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_nccl.h"

/* NCCL's device-API communicator calls (nccl_device/core.h needs CUDA's compiler). */
struct ncclDevCommRequirements;
struct ncclDevComm;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* out_dev_comm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* dev_comm);

static int failures = 0;
static int rank = -1, size = 0;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "rank %d: FAILED ", rank);         \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
      ++failures;                                        \
    }                                                    \
  } while (0)

#define NCCL_OK(call)                                                                           \
  do {                                                                                          \
    ncclResult_t r_ = (call);                                                                   \
    CHECK(r_ == ncclSuccess, "%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), \
          ncclGetLastError(NULL));                                                              \
  } while (0)

static void share_id(ncclUniqueId* id, const char* what) {
  const char* token = getenv("GNIO_JOB_TOKEN");
  const char* tmp = getenv("TMPDIR");
  char path[512], part[600];
  snprintf(path, sizeof(path), "%s/nccl-dropin-%s-%s", tmp && *tmp ? tmp : "/tmp", what,
           token ? token : "x");
  if (rank == 0) {
    NCCL_OK(ncclGetUniqueId(id));
    snprintf(part, sizeof(part), "%s.part", path);
    FILE* f = fopen(part, "wb");
    fwrite(id, sizeof(*id), 1, f);
    fclose(f);
    rename(part, path);
  } else {
    for (int i = 0; i < 20000; ++i) {
      FILE* f = fopen(path, "rb");
      if (f) {
        size_t got = fread(id, sizeof(*id), 1, f);
        fclose(f);
        if (got == 1) return;
      }
      usleep(1000);
    }
    fprintf(stderr, "rank %d: no unique id in %s\n", rank, path);
    exit(2);
  }
}

/* Rank r's element i: small integers, exact in every type. */
static int32_t value(int r, size_t i) {
  return (int32_t)((i * 7 + (size_t)r * 3) % 13) + r + 1;
}

static void test_allreduce(ncclComm_t comm) {
  enum { N = 1025 };
  float* fs = malloc(N * sizeof(float));
  float* fr = malloc(N * sizeof(float));
  int32_t* is = malloc(N * sizeof(int32_t));
  int32_t* ir = malloc(N * sizeof(int32_t));
  int64_t* ls = malloc(N * sizeof(int64_t));
  uint32_t* us = malloc(N * sizeof(uint32_t));
  uint32_t* ur = malloc(N * sizeof(uint32_t));
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
  for (int o = 0; o < 4; ++o) {
    for (size_t i = 0; i < N; ++i) {
      fs[i] = (float)value(rank, i) / (ops[o] == ncclProd ? 4.0f : 1.0f);
      is[i] = value(rank, i);
      ls[i] = (int64_t)value(rank, i) << (ops[o] == ncclProd ? 0 : 20);
      fr[i] = -1.0f;
      ir[i] = -1;
    }
    NCCL_OK(ncclAllReduce(fs, fr, N, ncclFloat32, ops[o], comm, NULL));
    NCCL_OK(ncclAllReduce(is, ir, N, ncclInt32, ops[o], comm, NULL));
    NCCL_OK(ncclAllReduce(ls, ls, N, ncclInt64, ops[o], comm, NULL)); /* in place */
    int wrong = 0;
    for (size_t i = 0; i < N; ++i) {
      double f = ops[o] == ncclProd ? 1 : ops[o] == ncclSum ? 0 : fs[i];
      int64_t n = ops[o] == ncclProd ? 1 : ops[o] == ncclSum ? 0 : value(0, i);
      for (int r = 0; r < size; ++r) {
        double fv = (double)value(r, i) / (ops[o] == ncclProd ? 4.0 : 1.0);
        int64_t v = value(r, i);
        if (ops[o] == ncclSum) {
          f += fv;
          n += v;
        }
        if (ops[o] == ncclProd) {
          f *= fv;
          n *= v;
        }
        if (ops[o] == ncclMax) {
          f = r == 0 || fv > f ? fv : f;
          n = v > n ? v : n;
        }
        if (ops[o] == ncclMin) {
          f = r == 0 || fv < f ? fv : f;
          n = v < n ? v : n;
        }
      }
      const int64_t nl = ops[o] == ncclProd ? n : n * (1 << 20);
      if (fr[i] != (float)f || ir[i] != (int32_t)n || ls[i] != nl) ++wrong;
    }
    CHECK(wrong == 0, "allreduce op %d: %d wrong elements", (int)ops[o], wrong);
  }
  /* Unsigned 32-bit sums: the same bits as signed ones. */
  for (size_t i = 0; i < N; ++i) {
    us[i] = 0xfffffff0u + (uint32_t)value(rank, i);
    ur[i] = 1;
  }
  NCCL_OK(ncclAllReduce(us, ur, N, ncclUint32, ncclSum, comm, NULL));
  int wrong = 0;
  for (size_t i = 0; i < N; ++i) {
    uint32_t want = 0;
    for (int r = 0; r < size; ++r) want += 0xfffffff0u + (uint32_t)value(r, i);
    wrong += ur[i] != want;
  }
  CHECK(wrong == 0, "allreduce uint32 sum: %d wrong", wrong);
  /* What gnio does not carry is refused, never run wrong. */
  ncclResult_t r = ncclAllReduce(fs, fr, N, ncclFloat32, ncclAvg, comm, NULL);
  CHECK(r == ncclInvalidUsage, "ncclAvg: expected ncclInvalidUsage, got %d", (int)r);
  CHECK(strstr(ncclGetLastError(comm), "ncclAvg") != NULL &&
            strstr(ncclGetLastError(comm), "GNIO_NCCL_FALLBACK") != NULL,
        "ncclAvg: reason '%s'", ncclGetLastError(comm));
  r = ncclAllReduce(us, ur, N, ncclUint32, ncclMax, comm, NULL);
  CHECK(r == ncclInvalidUsage, "uint32 max: expected ncclInvalidUsage, got %d", (int)r);
  r = ncclAllReduce(fs, fr, N, (ncclDataType_t)99, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument, "bad datatype: expected ncclInvalidArgument, got %d", (int)r);
  free(fs);
  free(fr);
  free(is);
  free(ir);
  free(ls);
  free(us);
  free(ur);
}

static void test_other_collectives(ncclComm_t comm) {
  enum { N = 517 };
  int32_t* send = malloc((size_t)N * size * sizeof(int32_t));
  int32_t* recv = malloc((size_t)N * size * sizeof(int32_t));
  int wrong;
  /* allgather */
  for (size_t i = 0; i < N; ++i) send[i] = value(rank, i);
  for (size_t i = 0; i < (size_t)N * size; ++i) recv[i] = -9;
  NCCL_OK(ncclAllGather(send, recv, N, ncclInt32, comm, NULL));
  wrong = 0;
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < N; ++i) wrong += recv[(size_t)r * N + i] != value(r, i);
  CHECK(wrong == 0, "allgather: %d wrong", wrong);
  /* reduce_scatter (sum) */
  for (size_t i = 0; i < (size_t)N * size; ++i) {
    send[i] = value(rank, i);
    recv[i] = -9;
  }
  NCCL_OK(ncclReduceScatter(send, recv, N, ncclInt32, ncclSum, comm, NULL));
  wrong = 0;
  for (size_t i = 0; i < N; ++i) {
    int32_t want = 0;
    for (int r = 0; r < size; ++r) want += value(r, (size_t)rank * N + i);
    wrong += recv[i] != want;
  }
  CHECK(wrong == 0, "reduce_scatter: %d wrong", wrong);
  /* broadcast from every root, and the in-place ncclBcast */
  for (int root = 0; root < size; ++root) {
    for (size_t i = 0; i < N; ++i) {
      send[i] = value(rank, i);
      recv[i] = -9;
    }
    NCCL_OK(ncclBroadcast(send, recv, N, ncclInt32, root, comm, NULL));
    NCCL_OK(ncclBcast(send, N, ncclInt32, root, comm, NULL));
    wrong = 0;
    for (size_t i = 0; i < N; ++i) wrong += recv[i] != value(root, i) || send[i] != value(root, i);
    CHECK(wrong == 0, "broadcast root %d: %d wrong", root, wrong);
  }
  /* reduce (max) to the last rank: written there only */
  const int root = size - 1;
  for (size_t i = 0; i < N; ++i) {
    send[i] = value(rank, i);
    recv[i] = -9;
  }
  NCCL_OK(ncclReduce(send, recv, N, ncclInt32, ncclMax, root, comm, NULL));
  wrong = 0;
  for (size_t i = 0; i < N; ++i) {
    int32_t want = value(0, i);
    for (int r = 1; r < size; ++r) want = value(r, i) > want ? value(r, i) : want;
    wrong += rank == root ? recv[i] != want : recv[i] != -9;
  }
  CHECK(wrong == 0, "reduce: %d wrong", wrong);
  /* alltoall */
  for (size_t i = 0; i < (size_t)N * size; ++i) {
    send[i] = value(rank, i);
    recv[i] = -9;
  }
  NCCL_OK(ncclAlltoAll(send, recv, N, ncclInt32, comm, NULL));
  wrong = 0;
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < N; ++i)
      wrong += recv[(size_t)r * N + i] != value(r, (size_t)rank * N + i);
  CHECK(wrong == 0, "alltoall: %d wrong", wrong);
  /* gather to rank 0, scatter from rank 0 */
  for (size_t i = 0; i < (size_t)N * size; ++i) {
    send[i] = value(rank, i);
    recv[i] = -9;
  }
  NCCL_OK(ncclGather(send, recv, N, ncclInt32, 0, comm, NULL));
  wrong = 0;
  if (rank == 0)
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < N; ++i) wrong += recv[(size_t)r * N + i] != value(r, i);
  CHECK(wrong == 0, "gather: %d wrong", wrong);
  for (size_t i = 0; i < (size_t)N * size; ++i) recv[i] = -9;
  NCCL_OK(ncclScatter(send, recv, N, ncclInt32, 0, comm, NULL));
  wrong = 0;
  for (size_t i = 0; i < N; ++i) wrong += recv[i] != value(0, (size_t)rank * N + i);
  CHECK(wrong == 0, "scatter: %d wrong", wrong);
  free(send);
  free(recv);
}

/* Grouped send/recv: a ring exchange larger than a channel holds, then an all-to-all. */
static void test_send_recv(ncclComm_t comm) {
  const size_t n = 300000; /* 1.2 MB: many slots, both ways at once */
  int32_t* out = malloc(n * sizeof(int32_t));
  int32_t* in = malloc(n * sizeof(int32_t));
  for (size_t i = 0; i < n; ++i) {
    out[i] = value(rank, i);
    in[i] = -9;
  }
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(out, n, ncclInt32, right, comm, NULL));
  NCCL_OK(ncclRecv(in, n, ncclInt32, left, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  int wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += in[i] != value(left, i);
  CHECK(wrong == 0, "ring send/recv: %d wrong", wrong);
  /* all-to-all through grouped send/recv, as PyTorch does it */
  enum { B = 1000 };
  int32_t* a = malloc((size_t)B * size * sizeof(int32_t));
  int32_t* b = malloc((size_t)B * size * sizeof(int32_t));
  for (size_t i = 0; i < (size_t)B * size; ++i) {
    a[i] = value(rank, i);
    b[i] = -9;
  }
  NCCL_OK(ncclGroupStart());
  for (int p = 0; p < size; ++p) {
    NCCL_OK(ncclSend(a + (size_t)p * B, B, ncclInt32, p, comm, NULL));
    NCCL_OK(ncclRecv(b + (size_t)p * B, B, ncclInt32, p, comm, NULL));
  }
  NCCL_OK(ncclGroupEnd());
  wrong = 0;
  for (int p = 0; p < size; ++p)
    for (size_t i = 0; i < B; ++i) wrong += b[(size_t)p * B + i] != value(p, (size_t)rank * B + i);
  CHECK(wrong == 0, "grouped all-to-all: %d wrong", wrong);
  ncclResult_t r = ncclSend(out, 1, ncclInt32, size, comm, NULL);
  CHECK(r == ncclInvalidArgument, "send to rank %d: expected ncclInvalidArgument, got %d", size,
        (int)r);
  free(out);
  free(in);
  free(a);
  free(b);
}

static void test_split(ncclComm_t comm) {
  /* Even and odd ranks, the odd ones in reverse order; rank 0 also asks for no communicator in a
   * second split. */
  ncclComm_t half = NULL, none = NULL;
  NCCL_OK(ncclCommSplit(comm, rank % 2, rank % 2 ? -rank : rank, &half, NULL));
  CHECK(half != NULL, "split: no communicator");
  int hs = 0, hr = -1;
  NCCL_OK(ncclCommCount(half, &hs));
  NCCL_OK(ncclCommUserRank(half, &hr));
  int members = 0, my_index = 0;
  for (int r = 0; r < size; ++r)
    if (r % 2 == rank % 2) ++members;
  for (int r = 0; r < size; ++r)
    if (r % 2 == rank % 2 && (rank % 2 ? r > rank : r < rank)) ++my_index;
  CHECK(hs == members && hr == my_index, "split: rank %d of %d, expected %d of %d", hr, hs,
        my_index, members);
  int64_t x = rank + 1, sum = 0;
  NCCL_OK(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, half, NULL));
  int64_t want = 0;
  for (int r = 0; r < size; ++r)
    if (r % 2 == rank % 2) want += r + 1;
  CHECK(sum == want, "split allreduce: %lld, expected %lld", (long long)sum, (long long)want);
  NCCL_OK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, NULL));
  CHECK((rank == 0) == (none == NULL), "NOCOLOR split");
  if (none) NCCL_OK(ncclCommDestroy(none));
  NCCL_OK(ncclCommDestroy(half));
}

/* The last rank is left out (it does not call, as in NCCL); the others make a communicator of
 * their own and reduce on it. */
static void test_shrink(ncclComm_t comm) {
  int last = size - 1;
  ncclComm_t small = NULL;
  if (rank == last) {
    ncclResult_t r = ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_DEFAULT);
    CHECK(r == ncclInvalidArgument && small == NULL, "shrink excluding the caller: %d", (int)r);
    return;
  }
  ncclResult_t r = ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_ABORT);
  CHECK(r == ncclInvalidUsage && small == NULL, "NCCL_SHRINK_ABORT: %d", (int)r);
  NCCL_OK(ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
  CHECK(small != NULL, "shrink: no communicator");
  if (small == NULL) return;
  int n = 0, me = -1;
  NCCL_OK(ncclCommCount(small, &n));
  NCCL_OK(ncclCommUserRank(small, &me));
  CHECK(n == size - 1 && me == rank, "shrink: rank %d of %d", me, n);
  int64_t x = rank + 1, sum = -1;
  NCCL_OK(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, small, NULL));
  CHECK(sum == (int64_t)(size - 1) * size / 2, "shrink allreduce: %lld", (long long)sum);
  NCCL_OK(ncclCommDestroy(small));
}

/* The last rank leaves without a word right after a first allreduce; every other rank must see
 * ncclRemoteError from ncclCommGetAsyncError within 30 s, and a collective after that must fail,
 * not hang or succeed. */
static int dead_peer(void) {
  ncclUniqueId id;
  share_id(&id, "dead");
  ncclComm_t comm = NULL;
  NCCL_OK(ncclCommInitRank(&comm, size, id, rank));
  if (comm == NULL) return 1;
  int32_t one = 1, total = 0;
  NCCL_OK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(total == size, "first allreduce: %d", total);
  if (rank == size - 1) {
    sleep(2); /* the others have their result by then (an eager allreduce returns with it) */
    _exit(0); /* no destroy, no goodbye */
  }
  ncclResult_t async = ncclSuccess;
  for (int i = 0; i < 3000 && async == ncclSuccess; ++i) {
    NCCL_OK(ncclCommGetAsyncError(comm, &async));
    if (async == ncclSuccess) usleep(10000);
  }
  CHECK(async == ncclRemoteError, "async error after a peer died: %d (%s)", (int)async,
        ncclGetLastError(comm));
  CHECK(strstr(ncclGetLastError(comm), "rank") != NULL, "the reason names no rank: %s",
        ncclGetLastError(comm));
  ncclResult_t r = ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, comm, NULL);
  CHECK(r != ncclSuccess, "a collective after the peer died returned ncclSuccess");
  NCCL_OK(ncclCommAbort(comm));
  if (rank == 0) printf("nccl_dropin_test --dead-peer: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

/* ---- --fallback: calls gnio does not carry, on the fake NCCL (GNIO_NCCL_FALLBACK) ---- */

static int saved_stderr = -1;
static char capture_path[600];

/* This process's stderr goes to a file until release_stderr(): the log lines are counted there. */
static void capture_stderr(void) {
  const char* tmp = getenv("TMPDIR");
  const char* token = getenv("GNIO_JOB_TOKEN");
  snprintf(capture_path, sizeof(capture_path), "%s/nccl-fallback-stderr-%s-%d",
           tmp && *tmp ? tmp : "/tmp", token ? token : "x", rank);
  int fd = open(capture_path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  if (fd < 0) return;
  fflush(stderr);
  saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
}

/* Restores stderr, passes on what was written meanwhile, and returns it (malloc'd). */
static char* release_stderr(void) {
  if (saved_stderr < 0) return calloc(1, 1);
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  saved_stderr = -1;
  FILE* f = fopen(capture_path, "rb");
  char* text = calloc(1, 1 << 20);
  if (f) {
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = '\0';
    fclose(f);
  }
  unlink(capture_path);
  fputs(text, stderr);
  return text;
}

/* Lines of `text` that contain both `a` and `b`. */
static int lines_with(const char* text, const char* a, const char* b) {
  int n = 0;
  while (*text) {
    const char* eol = strchr(text, '\n');
    size_t len = eol ? (size_t)(eol - text) : strlen(text);
    char line[2048];
    if (len >= sizeof(line)) len = sizeof(line) - 1;
    memcpy(line, text, len);
    line[len] = '\0';
    n += strstr(line, a) != NULL && strstr(line, b) != NULL;
    text += len + (eol != NULL);
  }
  return n;
}

/* Everything the fake NCCL (loaded by the drop-in) recorded so far. */
static const char* fake_record(void) {
  static const char* (*record)(void) = NULL;
  if (record == NULL) {
    void* h = dlopen(getenv("GNIO_NCCL_FALLBACK"), RTLD_NOW | RTLD_NOLOAD);
    if (h) *(void**)&record = dlsym(h, FAKE_NCCL_RECORD_FN);
  }
  return record ? record() : "";
}

/* The record's lines that are exactly `line`. */
static int recorded(const char* line) {
  int n = 0;
  const size_t len = strlen(line);
  for (const char* p = fake_record(); (p = strstr(p, line)) != NULL; p += len) n += p[len] == '\n';
  return n;
}

/* A reduction the fake took: the marker over exactly `count` elements of `out` (where `written`),
 * the bytes after it untouched, and `times` record lines with the call's arguments and the fake
 * communicator's rank and size. */
static void expect_fake_reduction(const char* call, ncclResult_t r, const unsigned char* out,
                                  size_t count, size_t elem, ncclDataType_t type, ncclRedOp_t op,
                                  int root, int frank, int fsize, int written, int times) {
  CHECK(r == ncclSuccess, "%s (type %d, op %d) through the fallback: %d (%s)", call, (int)type,
        (int)op, (int)r, ncclGetLastError(NULL));
  const unsigned char marker = fake_nccl_marker((int)op, (int)type, frank);
  int wrong = 0;
  for (size_t i = 0; i < (count + 4) * elem; ++i)
    wrong += out[i] != (written && i < count * elem ? marker : 0x11);
  CHECK(wrong == 0, "%s (type %d, op %d): %d bytes not the fake's", call, (int)type, (int)op,
        wrong);
  char line[256];
  snprintf(line, sizeof(line), "%s count=%zu type=%d op=%d root=%d rank=%d nranks=%d", call, count,
           (int)type, (int)op, root, frank, fsize);
  CHECK(recorded(line) == times, "the fake took '%s' %d times, expected %d", line, recorded(line),
        times);
}

/* A buffer of `n` elements of `elem` bytes and 4 more, all 0x11. */
static unsigned char* poisoned(unsigned char* buf, size_t n, size_t elem) {
  memset(buf, 0x11, (n + 4) * elem);
  return buf;
}

static int fallback(void) {
  enum { N = 1025 };
  capture_stderr();
  ncclUniqueId id;
  share_id(&id, "fallback");
  ncclComm_t comm = NULL;
  NCCL_OK(ncclCommInitRank(&comm, size, id, rank));
  if (comm == NULL) {
    free(release_stderr());
    return 1;
  }
  /* A fake communicator of this rank and size, from rank 0's fake unique id. */
  char line[256];
  snprintf(line, sizeof(line), "ncclCommInitRank nranks=%d rank=%d id=", size, rank);
  const char* init = strstr(fake_record(), line);
  CHECK(init != NULL, "no fake communicator of rank %d of %d: %s", rank, size, fake_record());
  unsigned pid_seq[2] = {0, 0};
  int self = -1;
  if (init) sscanf(init + strlen(line), "%u.%u self=%d", &pid_seq[0], &pid_seq[1], &self);
  /* Its own ncclGetVersion reached the fake's (RTLD_DEEPBIND), except where sanitizers forbid. */
  CHECK(self == NCCL_TEST_DEEPBIND, "the fake's call of its own ncclGetVersion: self=%d", self);
  const char* id_call = strstr(fake_record(), "ncclGetUniqueId");
  CHECK((id_call != NULL) == (rank == 0), "ncclGetUniqueId of the fake on rank %d", rank);
  unsigned* ids = malloc(2 * sizeof(unsigned) * (size_t)size);
  NCCL_OK(ncclAllGather(pid_seq, ids, 2, ncclUint32, comm, NULL));
  for (int r = 0; r < size; ++r)
    CHECK(ids[2 * r] == ids[0] && ids[2 * r + 1] == ids[1] && ids[0] != 0,
          "rank %d's fake communicator is of id %u.%u, rank 0's of %u.%u", r, ids[2 * r],
          ids[2 * r + 1], ids[0], ids[1]);
  CHECK(rank != 0 || ids[0] == (unsigned)getpid(), "the fake id is not rank 0's");
  free(ids);

  /* What gnio carries still runs on gnio. */
  int32_t* is = malloc(N * sizeof(int32_t));
  int32_t* ir = malloc(N * sizeof(int32_t));
  for (size_t i = 0; i < N; ++i) {
    is[i] = value(rank, i);
    ir[i] = -1;
  }
  NCCL_OK(ncclAllReduce(is, ir, N, ncclInt32, ncclSum, comm, NULL));
  int wrong = 0;
  for (size_t i = 0; i < N; ++i) {
    int32_t want = 0;
    for (int r = 0; r < size; ++r) want += value(r, i);
    wrong += ir[i] != want;
  }
  CHECK(wrong == 0, "int32 sum with a fallback loaded: %d wrong", wrong);
  CHECK(strstr(fake_record(), "ncclAllReduce") == NULL, "a sum reached the fake NCCL");

  /* What it does not carry reaches the fake, arguments unchanged. */
  unsigned char* in = calloc((N + 4) * 8, 1);
  unsigned char* out = malloc((N + 4) * 8);
  for (int i = 1; i <= 2; ++i) /* twice: still one log line */
    expect_fake_reduction(
        "ncclAllReduce",
        ncclAllReduce(in, poisoned(out, N, 4), N, ncclFloat32, ncclAvg, comm, NULL), out, N, 4,
        ncclFloat32, ncclAvg, -1, rank, size, 1, i);
  expect_fake_reduction("ncclAllReduce",
                        ncclAllReduce(in, poisoned(out, N, 4), N, ncclUint32, ncclMax, comm, NULL),
                        out, N, 4, ncclUint32, ncclMax, -1, rank, size, 1, 1);
  expect_fake_reduction(
      "ncclReduce", ncclReduce(in, poisoned(out, N, 1), N, ncclInt8, ncclMin, size - 1, comm, NULL),
      out, N, 1, ncclInt8, ncclMin, size - 1, rank, size, rank == size - 1, 1);
  expect_fake_reduction(
      "ncclReduceScatter",
      ncclReduceScatter(in, poisoned(out, N, 8), N, ncclUint64, ncclMax, comm, NULL), out, N, 8,
      ncclUint64, ncclMax, -1, rank, size, 1, 1);

  /* A user operator lives on the fake's communicator; collectives with it go there. */
  ncclRedOp_t op = ncclSum;
  float scalar = 0.5f;
  NCCL_OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  CHECK((int)op == (int)ncclNumOps, "the user operator is %d", (int)op);
  snprintf(line, sizeof(line), "ncclRedOpCreatePreMulSum op=%d type=%d scalar=0.5 rank=%d",
           (int)ncclNumOps, (int)ncclFloat32, rank);
  CHECK(recorded(line) == 1, "the fake did not make '%s'", line);
  expect_fake_reduction("ncclAllReduce",
                        ncclAllReduce(in, poisoned(out, N, 4), N, ncclFloat32, op, comm, NULL), out,
                        N, 4, ncclFloat32, op, -1, rank, size, 1, 1);
  NCCL_OK(ncclRedOpDestroy(op, comm));
  snprintf(line, sizeof(line), "ncclRedOpDestroy op=%d rank=%d", (int)ncclNumOps, rank);
  CHECK(recorded(line) == 1, "the fake did not destroy the operator");
  /* The fake's own refusal comes back with its reason. */
  ncclResult_t r = ncclAllReduce(in, out, N, ncclFloat32, (ncclRedOp_t)1000, comm, NULL);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "fake NCCL: ") != NULL &&
            strstr(ncclGetLastError(comm), "on the real NCCL") != NULL,
        "an operator the fake never made: %d (%s)", (int)r, ncclGetLastError(comm));

  /* NCCL's device API: windows and ncclDevComm. */
  ncclWindow_t win = NULL;
  NCCL_OK(ncclCommWindowRegister(comm, in, 4096, &win, NCCL_WIN_COLL_SYMMETRIC));
  CHECK(win == (ncclWindow_t)in, "the fake's window did not come back");
  snprintf(line, sizeof(line), "ncclCommWindowRegister size=4096 flags=%d rank=%d",
           NCCL_WIN_COLL_SYMMETRIC, rank);
  CHECK(recorded(line) == 1, "the fake did not register '%s'", line);
  NCCL_OK(ncclCommWindowDeregister(comm, win));
  snprintf(line, sizeof(line), "ncclCommWindowDeregister win=set rank=%d", rank);
  CHECK(recorded(line) == 1, "the fake did not deregister the window");
  unsigned char reqs[64] = {0}, dev_comm[256] = {0};
  NCCL_OK(ncclDevCommCreate(comm, (const struct ncclDevCommRequirements*)reqs,
                            (struct ncclDevComm*)dev_comm));
  CHECK(dev_comm[0] == FAKE_NCCL_DEVCOMM_BYTE && dev_comm[15] == FAKE_NCCL_DEVCOMM_BYTE &&
            dev_comm[16] == 0,
        "ncclDevCommCreate: the fake's ncclDevComm did not come back");
  NCCL_OK(ncclDevCommDestroy(comm, (const struct ncclDevComm*)dev_comm));
  snprintf(line, sizeof(line), "ncclDevCommDestroy devcomm=ours rank=%d", rank);
  CHECK(recorded(line) == 1, "the fake did not destroy its ncclDevComm");
  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d with a fallback", (int)async);

  /* A split communicator has a fake one of its own ranks. */
  ncclComm_t half = NULL;
  NCCL_OK(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
  int hs = 0, hr = -1;
  if (half) {
    NCCL_OK(ncclCommCount(half, &hs));
    NCCL_OK(ncclCommUserRank(half, &hr));
    expect_fake_reduction(
        "ncclAllReduce",
        ncclAllReduce(in, poisoned(out, N, 4), N, ncclFloat32, ncclAvg, half, NULL), out, N, 4,
        ncclFloat32, ncclAvg, -1, hr, hs, 1, 1);
    NCCL_OK(ncclCommDestroy(half));
    snprintf(line, sizeof(line), "ncclCommDestroy rank=%d nranks=%d", hr, hs);
    CHECK(recorded(line) >= 1, "the split's fake communicator was not destroyed");
  }
  /* So has a shrunk one (the last rank is left out and does not call). */
  if (rank != size - 1) {
    int last = size - 1;
    ncclComm_t small = NULL;
    NCCL_OK(ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
    if (small) {
      expect_fake_reduction(
          "ncclAllReduce",
          ncclAllReduce(in, poisoned(out, N, 8), N, ncclFloat64, ncclAvg, small, NULL), out, N, 8,
          ncclFloat64, ncclAvg, -1, rank, size - 1, 1, 1);
      int32_t x = rank + 1, sum = -1;
      NCCL_OK(ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, small, NULL));
      CHECK(sum == (size - 1) * size / 2, "shrunk allreduce on gnio: %d", sum);
      NCCL_OK(ncclCommDestroy(small));
    }
  }

  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));
  snprintf(line, sizeof(line), "ncclCommFinalize rank=%d nranks=%d", rank, size);
  CHECK(recorded(line) == 1, "the fake communicator was not finalized");
  snprintf(line, sizeof(line), "ncclCommDestroy rank=%d nranks=%d", rank, size);
  CHECK(recorded(line) >= 1, "the fake communicator was not destroyed");
  ncclComm_t doomed = NULL;
  share_id(&id, "fallback-abort");
  NCCL_OK(ncclCommInitRank(&doomed, size, id, rank));
  NCCL_OK(ncclCommAbort(doomed));
  snprintf(line, sizeof(line), "ncclCommAbort rank=%d nranks=%d", rank, size);
  CHECK(recorded(line) == 1, "the fake communicator was not aborted");

  /* One log line per kind of call that fell back, however often it did. */
  char* err = release_stderr();
  static const char* const kinds[] = {
      "ncclAllReduce: ncclAvg",
      "ncclAllReduce: min/max of ncclUint32",
      "ncclReduce: min/max of ncclInt8",
      "ncclReduceScatter: min/max of ncclUint64",
      "ncclRedOpCreatePreMulSum: ",
      "ncclAllReduce: PreMulSum",
      "ncclRedOpDestroy: ",
      "ncclCommWindowRegister: ",
      "ncclCommWindowDeregister: ",
      "ncclDevCommCreate: ",
      "ncclDevCommDestroy: ",
  };
  const int n_kinds = (int)(sizeof(kinds) / sizeof(kinds[0]));
  const char* said = "runs on the real NCCL";
  for (int k = 0; k < n_kinds; ++k)
    CHECK(lines_with(err, kinds[k], said) == 1, "%d log lines of '%s', expected 1",
          lines_with(err, kinds[k], said), kinds[k]);
  CHECK(lines_with(err, "WARN", said) == n_kinds, "%d fallback log lines, expected %d",
        lines_with(err, "WARN", said), n_kinds);
  free(err);
  free(is);
  free(ir);
  free(in);
  free(out);
  if (rank == 0) printf("nccl_dropin_test --fallback: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

/* ---- --bad-fallback: a fallback that cannot be one fails communicator creation ---- */

static int bad_fallback(const char* fake, const char* incomplete) {
  Dl_info self;
  CHECK(dladdr((void*)ncclGetVersion, &self) != 0, "dladdr");
  const struct {
    const char* path;
    const char* version; /* FAKE_NCCL_VERSION */
    int loaded;          /* loaded by the program first, as PyTorch loads libnccl.so.2 */
    const char* reason;
  } cases[] = {
      {"/nonexistent/libnccl.so.2", NULL, 0, "dlopen failed"},
      {incomplete, NULL, 0, "has no ncclDevCommCreate"},
      {fake, "22600", 0, "it is NCCL 2.26.0"},
      {self.dli_fname, NULL, 0, "libgnio_nccl itself"},
      {fake, NULL, 1, "has loaded it already"},
  };
  ncclUniqueId id;
  share_id(&id, "bad-fallback");
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    setenv("GNIO_NCCL_FALLBACK", cases[i].path, 1);
    if (cases[i].version)
      setenv("FAKE_NCCL_VERSION", cases[i].version, 1);
    else
      unsetenv("FAKE_NCCL_VERSION");
    void* loaded = cases[i].loaded ? dlopen(cases[i].path, RTLD_NOW | RTLD_LOCAL) : NULL;
    ncclComm_t comm = (ncclComm_t)&id;
    ncclResult_t r = ncclCommInitRank(&comm, size, id, rank);
    const char* why = ncclGetLastError(NULL);
    if (loaded) dlclose(loaded);
    CHECK(r == ncclInvalidArgument && comm == NULL && strstr(why, cases[i].path) != NULL &&
              strstr(why, cases[i].reason) != NULL,
          "GNIO_NCCL_FALLBACK=%s: %d, reason '%s' (expected one naming the path and '%s')",
          cases[i].path, (int)r, why, cases[i].reason);
    if (rank == 0) printf("GNIO_NCCL_FALLBACK=%s: %s\n", cases[i].path, why);
  }
  /* Nothing was left behind: without the variable the same id makes a gnio communicator. */
  unsetenv("GNIO_NCCL_FALLBACK");
  unsetenv("FAKE_NCCL_VERSION");
  ncclComm_t comm = NULL;
  NCCL_OK(ncclCommInitRank(&comm, size, id, rank));
  if (comm) {
    int32_t x = rank + 1, sum = -1;
    NCCL_OK(ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, comm, NULL));
    CHECK(sum == size * (size + 1) / 2, "allreduce after the refusals: %d", sum);
    NCCL_OK(ncclCommDestroy(comm));
  }
  if (rank == 0) printf("nccl_dropin_test --bad-fallback: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  rank = atoi(getenv("RANK") ? getenv("RANK") : "-1");
  size = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "0");
  if (rank < 0 || size < 1) {
    fprintf(stderr, "run under gnio-run\n");
    return 2;
  }
  if (argc > 1 && strcmp(argv[1], "--dead-peer") == 0) return dead_peer();
  if (argc > 1 && strcmp(argv[1], "--fallback") == 0) return fallback();
  if (argc > 3 && strcmp(argv[1], "--bad-fallback") == 0) return bad_fallback(argv[2], argv[3]);
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "version %d", version);
  ncclUniqueId id;
  share_id(&id, "main");
  ncclComm_t comm = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  NCCL_OK(ncclCommInitRankConfig(&comm, size, id, rank, &config));
  if (comm == NULL) return 1;
  int count = 0, me = -1, device = 0;
  NCCL_OK(ncclCommCount(comm, &count));
  NCCL_OK(ncclCommUserRank(comm, &me));
  NCCL_OK(ncclCommCuDevice(comm, &device));
  CHECK(count == size && me == rank && device == -1, "queries: %d of %d, device %d", me, count,
        device);

  test_allreduce(comm);
  test_other_collectives(comm);
  test_send_recv(comm);
  test_split(comm);
  test_shrink(comm);

  /* Memory and registration. */
  void* mem = NULL;
  void* handle = NULL;
  NCCL_OK(ncclMemAlloc(&mem, 4096));
  NCCL_OK(ncclCommRegister(comm, mem, 4096, &handle));
  NCCL_OK(ncclCommDeregister(comm, handle));
  NCCL_OK(ncclMemFree(mem));
  /* Refused, with a reason: never a silent success. */
  ncclComm_t all[2];
  ncclResult_t r = ncclCommInitAll(all, 2, NULL);
  CHECK(r == ncclInvalidUsage && strlen(ncclGetLastError(NULL)) > 0, "ncclCommInitAll: %d", (int)r);
  ncclRedOp_t op;
  float scalar = 2.0f;
  r = ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm);
  CHECK(r == ncclInvalidUsage, "ncclRedOpCreatePreMulSum: %d", (int)r);
  unsigned char reqs[64] = {0}, dev_comm[256] = {0};
  ncclWindow_t win = NULL;
  r = ncclCommWindowRegister(comm, dev_comm, sizeof(dev_comm), &win, NCCL_WIN_DEFAULT);
  CHECK(r == ncclInvalidUsage && win == NULL, "ncclCommWindowRegister: %d", (int)r);
  r = ncclDevCommCreate(comm, (const struct ncclDevCommRequirements*)reqs,
                        (struct ncclDevComm*)dev_comm);
  CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(comm), "GNIO_NCCL_FALLBACK") != NULL,
        "ncclDevCommCreate: %d (%s)", (int)r, ncclGetLastError(comm));
  r = ncclDevCommDestroy(comm, (const struct ncclDevComm*)dev_comm);
  CHECK(r == ncclInvalidUsage, "ncclDevCommDestroy: %d", (int)r);
  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d on a healthy communicator", (int)async);
  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));

  /* Abort: a second communicator, aborted on every rank without a collective teardown. */
  ncclComm_t doomed = NULL;
  share_id(&id, "abort");
  NCCL_OK(ncclCommInitRank(&doomed, size, id, rank));
  NCCL_OK(ncclCommAbort(doomed));

  if (rank == 0) printf("nccl_dropin_test: %s (%d ranks)\n", failures ? "FAILED" : "ok", size);
  return failures ? 1 : 0;
}
