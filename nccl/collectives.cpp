// Collectives: NCCL's types and operators mapped onto gnio's, and each call onto gnio's
// stream-ordered collective. What gnio cannot carry is refused (ncclInvalidUsage with the reason
// in ncclGetLastError), never run wrong.
#include <optional>

#include "dropin.hpp"

namespace {

/// How a call moves `count` elements of an NCCL type with gnio.
struct Mapped {
  gnio::DataType type;
  std::size_t count;
};

/// A copy (no arithmetic): any type, as bytes.
Mapped as_bytes(int t, std::size_t count, const char* call) {
  const std::size_t b = gnio_nccl::bytes_of(t);
  if (b == 0)
    throw gnio::Error(
        gnio::ErrorClass::InvalidArgument,
        std::string(call) + ": datatype " + std::to_string(t) + " is not an NCCL type");
  return {gnio::DataType::U8, count * b};
}

/// A reduction: gnio's type for `t` under `op`. Sums and products of unsigned 32/64-bit and
/// signed 8-bit integers are the same bits as gnio's int32/int64/uint8 ones (two's complement,
/// modulo 2^n); their minimum and maximum are not.
Mapped for_reduction(int t, int op, std::size_t count, gnio::RedOp* gop, const char* call) {
  auto unsupported = [&](const char* why) -> Mapped {
    throw gnio::Error(gnio::ErrorClass::Unsupported, std::string(call) + ": " + why);
  };
  switch (op) {
    case ncclSum: *gop = gnio::RedOp::Sum; break;
    case ncclProd: *gop = gnio::RedOp::Prod; break;
    case ncclMax: *gop = gnio::RedOp::Max; break;
    case ncclMin: *gop = gnio::RedOp::Min; break;
    case ncclAvg: return unsupported("ncclAvg is not carried by gnio (sum, then scale)");
    default: return unsupported("PreMulSum and other user operators are not carried by gnio");
  }
  const bool wrapping = op == ncclSum || op == ncclProd;
  switch (t) {
    case ncclFloat32: return {gnio::DataType::F32, count};
    case ncclFloat64: return {gnio::DataType::F64, count};
    case ncclFloat16: return {gnio::DataType::F16, count};
    case ncclBfloat16: return {gnio::DataType::BF16, count};
    case ncclFloat8e4m3: return {gnio::DataType::F8E4M3, count};
    case ncclFloat8e5m2: return {gnio::DataType::F8E5M2, count};
    case ncclInt32: return {gnio::DataType::I32, count};
    case ncclInt64: return {gnio::DataType::I64, count};
    case ncclUint8: return {gnio::DataType::U8, count};
    case ncclInt8:
      if (wrapping) return {gnio::DataType::U8, count};
      return unsupported("min/max of ncclInt8 is not carried by gnio (no signed 8-bit type)");
    case ncclUint32:
      if (wrapping) return {gnio::DataType::I32, count};
      return unsupported("min/max of ncclUint32 is not carried by gnio (no unsigned 32-bit type)");
    case ncclUint64:
      if (wrapping) return {gnio::DataType::I64, count};
      return unsupported("min/max of ncclUint64 is not carried by gnio (no unsigned 64-bit type)");
    default:
      throw gnio::Error(
          gnio::ErrorClass::InvalidArgument,
          std::string(call) + ": datatype " + std::to_string(t) + " is not an NCCL type");
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

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, stream, "ncclAllReduce", [&](gnio::StreamRef s) {
    gnio::RedOp gop{};
    const Mapped m =
        for_reduction(gnio_nccl::raw(datatype), gnio_nccl::raw(op), count, &gop, "ncclAllReduce");
    gnio::allreduce(comm->comm, sendbuff, recvbuff, m.count, m.type, gop, s);
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(comm, stream, "ncclReduce", [&](gnio::StreamRef s) {
    gnio::RedOp gop{};
    const Mapped m =
        for_reduction(gnio_nccl::raw(datatype), gnio_nccl::raw(op), count, &gop, "ncclReduce");
    gnio::reduce(comm->comm, sendbuff, recvbuff, m.count, m.type, gop, root, s);
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return collective(comm, stream, "ncclReduceScatter", [&](gnio::StreamRef s) {
    gnio::RedOp gop{};
    const Mapped m = for_reduction(gnio_nccl::raw(datatype), gnio_nccl::raw(op), recvcount, &gop,
                                   "ncclReduceScatter");
    gnio::reduce_scatter(comm->comm, sendbuff, recvbuff, m.count, m.type, gop, s);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, stream, "ncclBroadcast", [&](gnio::StreamRef s) {
    const Mapped m = as_bytes(gnio_nccl::raw(datatype), count, "ncclBroadcast");
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
    const Mapped m = as_bytes(gnio_nccl::raw(datatype), sendcount, "ncclAllGather");
    gnio::allgather(comm->comm, sendbuff, recvbuff, m.count, m.type, s);
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective(comm, stream, "ncclAlltoAll", [&](gnio::StreamRef s) {
    const Mapped m = as_bytes(gnio_nccl::raw(datatype), count, "ncclAlltoAll");
    gnio::alltoall(comm->comm, sendbuff, recvbuff, m.count, m.type, s);
  });
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* /*scalar*/,
                                      ncclDataType_t /*datatype*/,
                                      ncclScalarResidence_t /*residence*/, ncclComm_t /*comm*/) {
  if (op != nullptr) *op = ncclNumOps;  // names no operator: a collective with it is refused
  return gnio_nccl::fail(ncclInvalidUsage,
                         "ncclRedOpCreatePreMulSum: user operators are not carried by gnio");
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t /*op*/, ncclComm_t /*comm*/) {
  return gnio_nccl::fail(ncclInvalidUsage,
                         "ncclRedOpDestroy: gnio created no user operator to destroy");
}

}  // extern "C"
