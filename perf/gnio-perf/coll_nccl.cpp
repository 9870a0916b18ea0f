#include "coll_nccl.hpp"

#include <string>

#include "harness/nccl_dl.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"

namespace gnio::perf {
namespace {

using gnio_bench::CollKind;
using gnio_bench::DataType;
using gnio_bench::RedOp;

int nccl_type(DataType t) {
  switch (t) {
    case DataType::F32: return gnio_bench::kNcclFloat32;
    case DataType::F16: return gnio_bench::kNcclFloat16;
    case DataType::BF16: return gnio_bench::kNcclBfloat16;
    case DataType::F64: return gnio_bench::kNcclFloat64;
    case DataType::I32: return gnio_bench::kNcclInt32;
    case DataType::I64: return gnio_bench::kNcclInt64;
    case DataType::U8: return gnio_bench::kNcclUint8;
    case DataType::F8E4M3: return gnio_bench::kNcclFloat8e4m3;
    case DataType::F8E5M2: return gnio_bench::kNcclFloat8e5m2;
  }
  return -1;
}

int nccl_op(RedOp op) {
  switch (op) {
    case RedOp::Sum: return gnio_bench::kNcclSum;
    case RedOp::Prod: return gnio_bench::kNcclProd;
    case RedOp::Min: return gnio_bench::kNcclMin;
    case RedOp::Max: return gnio_bench::kNcclMax;
    default: return -1;
  }
}

/// NCCL 2.24 added the fp8 types.
constexpr int kNcclFp8Version = 22400;

}  // namespace

NcclColl::NcclColl(Comm& comm) {
  if (comm.backend() != Backend::Cuda)
    throw Error(ErrorClass::Unsupported,
                "--vs-nccl needs the cuda backend (NCCL runs on GPUs); this run is on the " +
                    std::string(to_string(comm.backend())) +
                    " backend: drop --vs-nccl or run on GPUs");
  nccl_ = std::make_unique<gnio_bench::Nccl>();
  const gnio_bench::Nccl& n = *nccl_;
  if (!n.ok() || !n.get_unique_id || !n.all_reduce || !n.all_gather || !n.reduce_scatter ||
      !n.broadcast || !n.reduce || !n.send || !n.recv || !n.group_start || !n.group_end)
    throw Error(ErrorClass::Unsupported,
                "--vs-nccl: cannot load NCCL (" + n.error() +
                    "): install libnccl2 or point GNIO_BENCH_NCCL_LIB at a libnccl.so.2");
  Bootstrap& bs = comm.bootstrap();
  gnio_bench::NcclComm c = nullptr;
  const gnio_bench::NcclResult r =
      n.init_rank(&c, comm.rank(), comm.size(),
                  [&](void* data, std::size_t bytes) { bs.broadcast(data, bytes, 0); });
  if (r != 0)
    throw Error(ErrorClass::SystemError, "--vs-nccl: ncclCommInitRank failed on rank " +
                                             std::to_string(comm.rank()) + ": " + n.describe(r));
  comm_ = c;
}

NcclColl::~NcclColl() {
  if (comm_) nccl_->comm_destroy(static_cast<gnio_bench::NcclComm>(comm_));
}

std::string NcclColl::description() const {
  return nccl_->version() + " (" + nccl_->path() + ")";
}

bool NcclColl::supports(CollKind k, DataType t, RedOp op) const {
  if ((t == DataType::F8E4M3 || t == DataType::F8E5M2) && nccl_->version_code() < kNcclFp8Version)
    return false;
  return !gnio_bench::is_reducing(k) || nccl_op(op) >= 0;
}

void NcclColl::call(const gnio_bench::CollCall& c, const void* send, void* recv,
                    CUstream_st* stream) {
  const gnio_bench::Nccl& n = *nccl_;
  const auto comm = static_cast<gnio_bench::NcclComm>(comm_);
  const int type = nccl_type(c.type), op = nccl_op(c.op);
  const std::size_t es = gnio::size_of(c.type);
  auto check = [&](gnio_bench::NcclResult r, const char* what) {
    if (r != 0)
      throw Error(ErrorClass::SystemError, std::string("--vs-nccl: ") + what + " failed on rank " +
                                               std::to_string(c.rank) + ": " + n.describe(r));
  };
  // Grouped point-to-point exchange: block q of `send` to rank q, block q of `recv` from it.
  auto exchange = [&](auto send_count, auto send_displ, auto recv_count, auto recv_displ) {
    check(n.group_start(), "ncclGroupStart");
    for (int q = 0; q < c.ranks; ++q) {
      const std::size_t qi = static_cast<std::size_t>(q);
      check(n.send(static_cast<const char*>(send) + send_displ(qi) * es, send_count(qi), type, q,
                   comm, stream),
            "ncclSend");
      check(n.recv(static_cast<char*>(recv) + recv_displ(qi) * es, recv_count(qi), type, q, comm,
                   stream),
            "ncclRecv");
    }
    check(n.group_end(), "ncclGroupEnd");
  };
  switch (c.kind) {
    case CollKind::AllReduce:
      check(n.all_reduce(send, recv, c.count, type, op, comm, stream), "ncclAllReduce");
      break;
    case CollKind::ReduceScatter:
      check(n.reduce_scatter(send, recv, c.count, type, op, comm, stream), "ncclReduceScatter");
      break;
    case CollKind::AllGather:
      check(n.all_gather(send, recv, c.count, type, comm, stream), "ncclAllGather");
      break;
    case CollKind::Broadcast:
      check(n.broadcast(send, recv, c.count, type, c.root, comm, stream), "ncclBroadcast");
      break;
    case CollKind::Reduce:
      check(n.reduce(send, recv, c.count, type, op, c.root, comm, stream), "ncclReduce");
      break;
    case CollKind::AllToAll: {
      auto count = [&](std::size_t) { return c.count; };
      auto displ = [&](std::size_t q) { return q * c.count; };
      exchange(count, displ, count, displ);
      break;
    }
    case CollKind::AllToAllV:
      exchange([&](std::size_t q) { return c.send_counts[q]; },
               [&](std::size_t q) { return c.send_displs[q]; },
               [&](std::size_t q) { return c.recv_counts[q]; },
               [&](std::size_t q) { return c.recv_displs[q]; });
      break;
  }
}

}  // namespace gnio::perf
