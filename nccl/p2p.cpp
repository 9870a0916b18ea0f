// Point to point: ncclSend/ncclRecv over gnio::Channels, ncclGroupStart/End (a group's sends and
// receives progress together, one channel group per communicator), and ncclGather/ncclScatter
// built from them.
#include <algorithm>
#include <vector>

#include "dropin.hpp"

namespace {

struct PendingOp {
  ncclComm* comm;
  bool is_send;
  void* buf;
  std::size_t bytes;
  int peer;
  cudaStream_t stream;
};

/// This thread's group: depth of ncclGroupStart nesting and the operations collected.
struct Group {
  int depth = 0;
  std::vector<PendingOp> ops;
};
thread_local Group group;

/// Queues every collected operation, one channel group per communicator, then waits for the
/// streams that are gnio's own. All of them are queued before any wait, so that sends and
/// receives on different communicators cannot wait on one another.
void run(std::vector<PendingOp> ops) {
  std::vector<ncclComm*> comms;
  for (const PendingOp& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm) == comms.end()) comms.push_back(op.comm);
  std::vector<std::pair<ncclComm*, gnio::StreamRef>> waits;
  for (ncclComm* comm : comms) {
    cudaStream_t stream = nullptr;
    std::size_t n = 0;
    bool first = true;
    for (const PendingOp& op : ops) {
      if (op.comm != comm) continue;
      if (!first && op.stream != stream)
        throw gnio::Error(gnio::ErrorClass::Unsupported,
                          "the sends and receives of one communicator in a group must use one "
                          "stream");
      stream = op.stream;
      first = false;
      ++n;
    }
    if (n > gnio::Channels::kMaxGroup)
      throw gnio::Error(gnio::ErrorClass::Unsupported,
                        "a group holds " + std::to_string(n) +
                            " sends and receives on one "
                            "communicator; gnio carries at most " +
                            std::to_string(gnio::Channels::kMaxGroup));
    bool wait = false;
    const gnio::StreamRef s = gnio_nccl::stream_of(comm, stream, &wait);
    comm->channels->group_start();
    for (const PendingOp& op : ops) {
      if (op.comm != comm) continue;
      if (op.is_send)
        comm->channels->send(op.buf, op.bytes, op.peer, s);
      else
        comm->channels->recv(op.buf, op.bytes, op.peer, s);
    }
    comm->channels->group_end(s);
    if (wait) waits.emplace_back(comm, s);
  }
  for (auto& [comm, s] : waits) comm->comm.synchronize(s);
}

ncclResult_t add(PendingOp op, const char* call) {
  if (op.comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "%s: comm is NULL", call);
  return gnio_nccl::guarded(call, [&] {
    if (op.peer < 0 || op.peer >= op.comm->comm.size())
      throw gnio::Error(gnio::ErrorClass::InvalidArgument,
                        "peer " + std::to_string(op.peer) +
                            " is not a rank of the communicator (0.." +
                            std::to_string(op.comm->comm.size() - 1) + ")");
    if (gnio_nccl::in_group()) {
      group.ops.push_back(op);
    } else {
      run({op});
    }
    return ncclSuccess;
  });
}

}  // namespace

namespace gnio_nccl {
bool in_group() {
  return group.depth > 0;
}
}  // namespace gnio_nccl

extern "C" {

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0)
    return gnio_nccl::fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart before it");
  if (--group.depth > 0) return ncclSuccess;
  std::vector<PendingOp> ops;
  ops.swap(group.ops);
  if (ops.empty()) return ncclSuccess;
  return gnio_nccl::guarded("ncclGroupEnd", [&] {
    run(std::move(ops));
    return ncclSuccess;
  });
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* /*sim_info*/) {
  return gnio_nccl::fail(ncclInvalidUsage, "ncclGroupSimulateEnd: not carried by gnio");
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const std::size_t b = gnio_nccl::bytes_of(gnio_nccl::raw(datatype));
  if (b == 0) return gnio_nccl::fail(ncclInvalidArgument, "ncclSend: not an NCCL datatype");
  return add({comm, true, const_cast<void*>(sendbuff), count * b, peer, stream}, "ncclSend");
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const std::size_t b = gnio_nccl::bytes_of(gnio_nccl::raw(datatype));
  if (b == 0) return gnio_nccl::fail(ncclInvalidArgument, "ncclRecv: not an NCCL datatype");
  return add({comm, false, recvbuff, count * b, peer, stream}, "ncclRecv");
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclGather: comm is NULL");
  const std::size_t b = gnio_nccl::bytes_of(gnio_nccl::raw(datatype));
  const int n = comm->comm.size();
  if (b == 0 || root < 0 || root >= n)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclGather: bad datatype or root %d", root);
  ncclGroupStart();
  ncclResult_t r = ncclSend(sendbuff, count, datatype, root, comm, stream);
  if (comm->comm.rank() == root)
    for (int p = 0; p < n && r == ncclSuccess; ++p)
      r = ncclRecv(static_cast<char*>(recvbuff) + p * count * b, count, datatype, p, comm, stream);
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclScatter: comm is NULL");
  const std::size_t b = gnio_nccl::bytes_of(gnio_nccl::raw(datatype));
  const int n = comm->comm.size();
  if (b == 0 || root < 0 || root >= n)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclScatter: bad datatype or root %d", root);
  ncclGroupStart();
  ncclResult_t r = ncclSuccess;
  if (comm->comm.rank() == root)
    for (int p = 0; p < n && r == ncclSuccess; ++p)
      r = ncclSend(static_cast<const char*>(sendbuff) + p * count * b, count, datatype, p, comm,
                   stream);
  if (r == ncclSuccess) r = ncclRecv(recvbuff, count, datatype, root, comm, stream);
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

}  // extern "C"
