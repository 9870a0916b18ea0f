/* An NCCL program in C, compiled against nccl.h only (no gnio header), run through
 * libgnio_nccl.so on the host backend: every collective (several types and operators), grouped
 * send/recv (a ring and an all-to-all), gather/scatter, split, abort, the queries, and the calls
 * gnio refuses (which must fail with a reason, never succeed silently). Every element is checked
 * against a value computed here; outputs are poisoned first.
 *
 *   gnio-run -n 3 -- nccl_dropin_test
 *
 * The unique id travels through a file named after gnio-run's job token. Exit 0 when every check
 * passed on this rank. */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  CHECK(strstr(ncclGetLastError(comm), "ncclAvg") != NULL, "ncclAvg: reason '%s'",
        ncclGetLastError(comm));
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

int main(int argc, char** argv) {
  rank = atoi(getenv("RANK") ? getenv("RANK") : "-1");
  size = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "0");
  if (rank < 0 || size < 1) {
    fprintf(stderr, "run under gnio-run\n");
    return 2;
  }
  if (argc > 1 && strcmp(argv[1], "--dead-peer") == 0) return dead_peer();
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
