// Collectives: NCCL's types and operators mapped onto gnio's, and each call onto gnio's
// stream-ordered collective. What gnio cannot carry runs on the real NCCL when one is loaded
// (GNIO_NCCL_FALLBACK), else is refused (ncclInvalidUsage with the reason in ncclGetLastError),
// never run wrong.
#include <string>

#include "dropin.hpp"

namespace {

constexpr const char* kNoUserOps = "PreMulSum and other user operators are not carried by gnio";

/// How a call moves `count` elements of an NCCL type with gnio.
struct Mapped {
  gnio::DataType type;
  std::size_t count;
};

gnio::Error not_an_nccl_type(int t) {
  return gnio::Error(gnio::ErrorClass::InvalidArgument,
                     "datatype " + std::to_string(t) + " is not an NCCL type");
}

/// A copy (no arithmetic): any type, as bytes.
Mapped as_bytes(int t, std::size_t count) {
  const std::size_t b = gnio_nccl::bytes_of(t);
  if (b == 0) throw not_an_nccl_type(t);
  return {gnio::DataType::U8, count * b};
}

/// Why gnio cannot carry a reduction of NCCL type `t` under `op`, or null when it can, as gnio's
/// `*type` under `*gop`. Throws Error(InvalidArgument) for a `t` that names no NCCL type. Sums
/// and products of unsigned 32/64-bit and signed 8-bit integers are the same bits as gnio's
/// int32/int64/uint8 ones (two's complement, modulo 2^n); their minimum and maximum are not.
const char* map_reduction(int t, int op, gnio::DataType* type, gnio::RedOp* gop) {
  if (gnio_nccl::bytes_of(t) == 0) throw not_an_nccl_type(t);
  switch (op) {
    case ncclSum: *gop = gnio::RedOp::Sum; break;
    case ncclProd: *gop = gnio::RedOp::Prod; break;
    case ncclMax: *gop = gnio::RedOp::Max; break;
    case ncclMin: *gop = gnio::RedOp::Min; break;
    case ncclAvg: return "ncclAvg is not carried by gnio (sum, then scale)";
    default: return kNoUserOps;
  }
  auto carried = [&](gnio::DataType d) -> const char* {
    *type = d;
    return nullptr;
  };
  const bool wrapping = op == ncclSum || op == ncclProd;
  switch (t) {
    case ncclFloat32: return carried(gnio::DataType::F32);
    case ncclFloat64: return carried(gnio::DataType::F64);
    case ncclFloat16: return carried(gnio::DataType::F16);
    case ncclBfloat16: return carried(gnio::DataType::BF16);
    case ncclFloat8e4m3: return carried(gnio::DataType::F8E4M3);
    case ncclFloat8e5m2: return carried(gnio::DataType::F8E5M2);
    case ncclInt32: return carried(gnio::DataType::I32);
    case ncclInt64: return carried(gnio::DataType::I64);
    case ncclUint8: return carried(gnio::DataType::U8);
    case ncclInt8:
      if (wrapping) return carried(gnio::DataType::U8);
      return "min/max of ncclInt8 is not carried by gnio (no signed 8-bit type)";
    case ncclUint32:
      if (wrapping) return carried(gnio::DataType::I32);
      return "min/max of ncclUint32 is not carried by gnio (no unsigned 32-bit type)";
    case ncclUint64:
      if (wrapping) return carried(gnio::DataType::I64);
      return "min/max of ncclUint64 is not carried by gnio (no unsigned 64-bit type)";
    default: throw not_an_nccl_type(t);
  }
}

/// Runs `enqueue(stream)` for a collective of `comm`, then waits where the stream is gnio's own.
template <class Enqueue>
ncclResult_t collective(ncclComm_t comm, cudaStream_t stream, const char* call, Enqueue&& enqueue) {
  if (comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "%s: comm is NULL", call);
  return gnio_nccl::guarded(call, [&] {
    bool wait = false;
    const gnio::StreamRef s = gnio_nccl::stream_of(comm, stream, &wait);
    enqueue(s);
    if (wait) comm->comm.synchronize(s);
    return ncclSuccess;
  });
}

/// A reduction of NCCL type `datatype` under `op`: `on_gnio(type, gop, stream)` when gnio carries
/// them, else `on_real(fallback, real_comm)` on the real NCCL, or refused without one. The enums
/// come by reference and are read raw: a C caller may pass a value no enumerator has, and
/// loading one as the enum (a copy into a by-value parameter) is undefined.
template <class OnGnio, class OnReal>
ncclResult_t reduction(ncclComm_t comm, cudaStream_t stream, const ncclDataType_t& datatype,
                       const ncclRedOp_t& op, const char* call, OnGnio&& on_gnio,
                       OnReal&& on_real) {
  if (comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "%s: comm is NULL", call);
  gnio::DataType type{};
  gnio::RedOp gop{};
  const char* why = nullptr;
  const ncclResult_t mapped = gnio_nccl::guarded(call, [&] {
    why = map_reduction(gnio_nccl::raw(datatype), gnio_nccl::raw(op), &type, &gop);
    return ncclSuccess;
  });
  if (mapped != ncclSuccess) return mapped;
  if (why != nullptr) return gnio_nccl::fall_back(comm, call, why, on_real);
  return collective(comm, stream, call, [&](gnio::StreamRef s) { on_gnio(type, gop, s); });
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return reduction(
      comm, stream, datatype, op, "ncclAllReduce",
      [&](gnio::DataType type, gnio::RedOp gop, gnio::StreamRef s) {
        gnio::allreduce(comm->comm, sendbuff, recvbuff, count, type, gop, s);
      },
      [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
        return f.AllReduce(sendbuff, recvbuff, count, datatype, op, real, stream);
      });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return reduction(
      comm, stream, datatype, op, "ncclReduce",
      [&](gnio::DataType type, gnio::RedOp gop, gnio::StreamRef s) {
        gnio::reduce(comm->comm, sendbuff, recvbuff, count, type, gop, root, s);
      },
      [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
        return f.Reduce(sendbuff, recvbuff, count, datatype, op, root, real, stream);
      });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return reduction(
      comm, stream, datatype, op, "ncclReduceScatter",
      [&](gnio::DataType type, gnio::RedOp gop, gnio::StreamRef s) {
        gnio::reduce_scatter(comm->comm, sendbuff, recvbuff, recvcount, type, gop, s);
      },
      [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
        return f.ReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, real, stream);
      });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, stream, "ncclBroadcast", [&](gnio::StreamRef s) {
    const Mapped m = as_bytes(gnio_nccl::raw(datatype), count);
    gnio::broadcast(comm->comm, sendbuff, recvbuff, m.count, m.type, root, s);
  });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective(comm, stream, "ncclAllGather", [&](gnio::StreamRef s) {
    const Mapped m = as_bytes(gnio_nccl::raw(datatype), sendcount);
    gnio::allgather(comm->comm, sendbuff, recvbuff, m.count, m.type, s);
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective(comm, stream, "ncclAlltoAll", [&](gnio::StreamRef s) {
    const Mapped m = as_bytes(gnio_nccl::raw(datatype), count);
    gnio::alltoall(comm->comm, sendbuff, recvbuff, m.count, m.type, s);
  });
}

// User operators live on the real NCCL's communicator: collectives with them go there too.
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (op == nullptr || comm == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or comm is NULL");
  *op = ncclNumOps;  // names no operator of gnio's: a collective with it falls back or is refused
  return gnio_nccl::fall_back(comm, "ncclRedOpCreatePreMulSum", kNoUserOps,
                              [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
                                return f.RedOpCreatePreMulSum(op, scalar, datatype, residence,
                                                              real);
                              });
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (comm == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  return gnio_nccl::fall_back(
      comm, "ncclRedOpDestroy", kNoUserOps,
      [&](const gnio_nccl::Fallback& f, ncclComm_t real) { return f.RedOpDestroy(op, real); });
}

}  // extern "C"
