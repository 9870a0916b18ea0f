// The checks of a host collective call before any effect (coll_validate.hpp).
#include "coll/coll_validate.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "base/fail.hpp"
#include "coll/coll_check.hpp"
#include "coll/coll_kernels.hpp"

namespace gnio::detail {

void check_stream(const Comm& comm, StreamRef stream) {
  const bool host_backend = comm.backend() == Backend::Host;
  GNIO_REQUIRE(
      stream.is_host() == host_backend,
      "rank %d: a %s stream was given to a collective on a communicator of the %s backend; "
      "use a gnio::Stream of this communicator",
      comm.rank(), stream.is_host() ? "host-backend" : "CUDA", to_string(comm.backend()));
  if (comm.nodes() > 1 && !CommServices(comm).has_network())
    fail(ErrorClass::Unsupported,
         "rank %d: collectives over %d nodes need the network transport to the other nodes, and "
         "this communicator has none (GNIO_NET=none, or a backend that does not carry it yet: "
         "docs/guide/multi-node.md)",
         comm.rank(), comm.nodes());
}

void validate(const Comm& comm, const Request& r) {
  const int n = comm.size(), me = comm.rank();
  const char* what = to_string(r.kind);
  GNIO_REQUIRE(static_cast<unsigned>(r.type) < static_cast<unsigned>(kDataTypeCount),
               "rank %d: %s: data type %d is not a gnio::DataType", me, what,
               static_cast<int>(r.type));
  if (reducing(r.kind)) {
    GNIO_REQUIRE(static_cast<unsigned>(r.op) < static_cast<unsigned>(kRedOpCount),
                 "rank %d: %s: operator %d is not a gnio::RedOp", me, what, static_cast<int>(r.op));
    GNIO_REQUIRE(
        !is_bitwise(r.op) || is_integer(r.type),
        "rank %d: %s: bitwise %s needs an integer type (i32, i64, u8), not %s; nothing was "
        "enqueued",
        me, what, to_string(r.op), to_string(r.type));
  }
  if (r.kind == CollKind::Broadcast || r.kind == CollKind::Reduce)
    GNIO_REQUIRE(r.root >= 0 && r.root < n, "rank %d: %s: root %d is not a rank of [0, %d)", me,
                 what, r.root, n);
  if (const KernelSet set = kernel_set(r.kind, r.type, r.op); !kernel_set_built(set))
    fail(ErrorClass::Unsupported,
         "rank %d: %s: this gnio was built without the '%s' collective kernels "
         "(GNIO_COLL_KERNEL_SETS); nothing was enqueued",
         me, what, to_string(set));
  const std::size_t es = size_of(r.type);
  if (r.kind == CollKind::AllToAllV) {
    GNIO_REQUIRE(n <= kMaxAlltoallvRanks,
                 "rank %d: alltoallv over %d ranks; at most %d are supported", me, n,
                 kMaxAlltoallvRanks);
    static const char* kNames[4] = {"send_counts", "send_displs", "recv_counts", "recv_displs"};
    bool any_send = false, any_recv = false;
    for (int i = 0; i < 4; ++i)
      GNIO_REQUIRE(r.a2av[i].size() == static_cast<std::size_t>(n),
                   "rank %d: alltoallv: %s has %zu entries; it needs one per rank (%d)", me,
                   kNames[i], r.a2av[i].size(), n);
    for (int p = 0; p < n; ++p) {
      const std::size_t sc = r.a2av[0][p], sd = r.a2av[1][p], rc = r.a2av[2][p], rd = r.a2av[3][p];
      GNIO_REQUIRE(sc <= kMaxBytes / es && sd <= kMaxBytes / es && rc <= kMaxBytes / es &&
                       rd <= kMaxBytes / es,
                   "rank %d: alltoallv: counts or displacements for rank %d are too large", me, p);
      any_send |= sc > 0;
      any_recv |= rc > 0;
    }
    GNIO_REQUIRE(!any_send || r.send, "rank %d: alltoallv: send is null but counts are not zero",
                 me);
    GNIO_REQUIRE(!any_recv || r.recv, "rank %d: alltoallv: recv is null but counts are not zero",
                 me);
    GNIO_REQUIRE(!(any_send && any_recv && r.send == r.recv),
                 "rank %d: alltoallv cannot run in place (send == recv)", me);
    return;
  }
  const std::size_t blocks =
      gathered_in(r.kind) || gathered_out(r.kind) ? static_cast<std::size_t>(n) : 1;
  GNIO_REQUIRE(r.count <= kMaxBytes / es / blocks,
               "rank %d: %s: count %zu of %s overflows (at most %zu elements in all)", me, what,
               r.count, to_string(r.type), kMaxBytes / es / blocks);
  if (r.count == 0) return;
  const bool send_needed = !(r.kind == CollKind::Broadcast && me != r.root);
  const bool recv_needed = !(r.kind == CollKind::Reduce && me != r.root);
  GNIO_REQUIRE(!send_needed || r.send, "rank %d: %s: send is null with count %zu", me, what,
               r.count);
  GNIO_REQUIRE(!recv_needed || r.recv, "rank %d: %s: recv is null with count %zu", me, what,
               r.count);
  if (r.kind == CollKind::AllToAll)
    GNIO_REQUIRE(r.send != r.recv, "rank %d: alltoall cannot run in place (send == recv)", me);
}

void cross_check(const Comm& comm, const CommServices& core, CollState& st, const Request& r,
                 StreamRef stream) {
  std::exception_ptr local;
  try {
    validate(comm, r);
    check_stream(comm, stream);
  } catch (const Error&) {
    local = std::current_exception();
  }
  const int n = comm.size(), me = comm.rank();
  std::lock_guard<std::mutex> lock(st.check_mu);
  CheckRecord rec;
  rec.magic = kCheckMagic;
  rec.seq = ++st.check_seq;
  rec.count = r.count;
  rec.kind = static_cast<std::uint32_t>(r.kind);
  rec.type = static_cast<std::uint32_t>(r.type);
  rec.op = static_cast<std::uint32_t>(reducing(r.kind) ? r.op : RedOp::Sum);
  rec.root = r.kind == CollKind::Broadcast || r.kind == CollKind::Reduce ? r.root : 0;
  rec.valid = local ? 0 : 1;
  std::vector<CheckRecord> all(static_cast<std::size_t>(n));
  all[static_cast<std::size_t>(me)] = rec;
  core.allgather(all.data(), sizeof(CheckRecord));
  // Every rank saw the same records: continue from the same number after a mismatch, so one
  // skipped call is reported once and the calls after it are checked normally.
  for (const CheckRecord& q : all)
    if (q.magic == kCheckMagic) st.check_seq = std::max(st.check_seq, q.seq);
  if (local) std::rethrow_exception(local);
  const std::string call = std::string(to_string(r.kind)) + " #" + std::to_string(rec.seq);
  const std::string problems = compare_records(all);
  if (!problems.empty())
    fail(ErrorClass::InvalidArgument,
         "rank %d: %s: %s; nothing was enqueued on any rank (GNIO_CHECK=1)", me, call.c_str(),
         problems.c_str());
  if (r.kind == CollKind::AllToAllV) check_alltoallv_pairs(core, r, call.c_str());
}

}  // namespace gnio::detail
