// NCCL as the reference of `gnio-perf coll --vs-nccl`: the same collective calls, on the same
// buffers and stream, through the machine's libnccl loaded at run time (perf/harness/nccl_dl.hpp),
// so gnio-perf needs no NCCL to build. The NCCL communicator is created from a unique id that
// travels over the gnio communicator's bootstrap, so it runs under gnio-run like the rest.
#pragma once

#include <memory>
#include <string>

#include "harness/coll_data.hpp"
#include "gnio/comm.hpp"

struct CUstream_st;

namespace gnio_bench {
class Nccl;
}

namespace gnio::perf {

/// An NCCL communicator over the ranks of a gnio communicator.
class NcclColl {
 public:
  /// Loads libnccl and creates the communicator (collective over `comm`'s ranks; one GPU each,
  /// the current one). Throws Error(Unsupported) when `comm` is not on the cuda backend or NCCL
  /// cannot be loaded (the message says what was tried), Error(SystemError) when NCCL fails.
  explicit NcclColl(Comm& comm);
  ~NcclColl();
  NcclColl(const NcclColl&) = delete;
  NcclColl& operator=(const NcclColl&) = delete;

  /// "2.28.9 (libnccl.so.2)".
  std::string description() const;
  /// True when NCCL has collective `k` for (t, op): no bitwise operators; fp8 from NCCL 2.24 on.
  /// `op` is ignored for the collectives that do not reduce.
  bool supports(gnio_bench::CollKind k, gnio_bench::DataType t, gnio_bench::RedOp op) const;
  /// Enqueues `c` on `stream` with NCCL (alltoall and alltoallv as grouped send/recv pairs, the
  /// way nccl-tests does). Throws Error(SystemError) with NCCL's message when a call fails.
  void call(const gnio_bench::CollCall& c, const void* send, void* recv, CUstream_st* stream);

 private:
  std::unique_ptr<gnio_bench::Nccl> nccl_;
  void* comm_ = nullptr;  // ncclComm_t
};

}  // namespace gnio::perf
