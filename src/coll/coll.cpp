// Host collectives: the public calls (gnio/coll.hpp) and the path of one call: checks, its
// stream's channel, then one flat call or the hierarchical parts. The names of the vocabulary are
// in coll_names.cpp, the communicator's collective state and channels in coll_state.hpp, the checks
// in coll_validate.hpp (GNIO_CHECK's cross-rank comparison in coll_check.hpp), the launches of one
// call in coll_enqueue.hpp, the hierarchical collectives in coll_hierarchy.hpp, the settings in
// coll_config.hpp and a call's description in coll_request.hpp.
#include "gnio/coll.hpp"

#include <mutex>
#include <string>

#include "coll/coll_config.hpp"
#include "coll/coll_enqueue.hpp"
#include "coll/coll_hierarchy.hpp"
#include "coll/coll_request.hpp"
#include "coll/coll_state.hpp"
#include "coll/coll_validate.hpp"
#include "core/comm_services.hpp"

namespace gnio {

namespace detail {
namespace {

void run(Comm& comm, const Request& r, StreamRef stream) {
  const CommServices core(comm);
  CollState& st = state(core);
  if (st.check) {
    cross_check(comm, core, st, r, stream);
  } else {
    validate(comm, r);
    check_stream(comm, stream);
  }
  if (r.kind != CollKind::AllToAllV && r.count == 0) return;
  const CollChannel ch = channel_for(core, st, stream);
  if (!hierarchical(st, r))
    enqueue(comm, st, ch, comm.world(), r, stream);
  else if (r.kind == CollKind::AllReduce)
    run_hierarchical_allreduce(comm, st, ch, r, stream);
  else
    run_hierarchical_allgather(comm, st, ch, r, stream);
}

}  // namespace
}  // namespace detail

// ------------------------------------------------------------------------------------------------

void allreduce(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, RedOp op,
               StreamRef stream) {
  detail::run(comm, detail::request(CollKind::AllReduce, type, op, send, recv, count), stream);
}

void reduce_scatter(Comm& comm, const void* send, void* recv, std::size_t recvcount, DataType type,
                    RedOp op, StreamRef stream) {
  detail::run(comm, detail::request(CollKind::ReduceScatter, type, op, send, recv, recvcount),
              stream);
}

void allgather(Comm& comm, const void* send, void* recv, std::size_t sendcount, DataType type,
               StreamRef stream) {
  detail::run(comm, detail::request(CollKind::AllGather, type, RedOp::Sum, send, recv, sendcount),
              stream);
}

void broadcast(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, int root,
               StreamRef stream) {
  detail::run(comm, detail::request(CollKind::Broadcast, type, RedOp::Sum, send, recv, count, root),
              stream);
}

void reduce(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, RedOp op,
            int root, StreamRef stream) {
  detail::run(comm, detail::request(CollKind::Reduce, type, op, send, recv, count, root), stream);
}

void alltoall(Comm& comm, const void* send, void* recv, std::size_t count, DataType type,
              StreamRef stream) {
  detail::run(comm, detail::request(CollKind::AllToAll, type, RedOp::Sum, send, recv, count),
              stream);
}

void alltoallv(Comm& comm, const void* send, std::span<const std::size_t> send_counts,
               std::span<const std::size_t> send_displs, void* recv,
               std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
               DataType type, StreamRef stream) {
  detail::Request r = detail::request(CollKind::AllToAllV, type, RedOp::Sum, send, recv, 0);
  r.a2av[0] = send_counts;
  r.a2av[1] = send_displs;
  r.a2av[2] = recv_counts;
  r.a2av[3] = recv_displs;
  detail::run(comm, r, stream);
}

void coll_prepare(Comm& comm, StreamRef stream) {
  detail::check_stream(comm, stream);
  const detail::CommServices core(comm);
  (void)detail::channel_for(core, detail::state(core), stream);
}

CollComm coll_comm(Comm& comm, StreamRef stream, const Team& team) {
  detail::check_stream(comm, stream);
  const detail::CommServices core(comm);
  detail::CollState& st = detail::state(core);
  const detail::CollChannel ch = detail::channel_for(core, st, stream);
  return detail::make_coll_comm(comm, st, ch, team);
}

CollComm coll_comm(Comm& comm, StreamRef stream) {
  return coll_comm(comm, stream, comm.world());
}

void coll_set_algorithm(Comm& comm, const std::string& spec) {
  const detail::AlgoTable t = detail::parse_algorithms(spec, "coll_set_algorithm");
  detail::CollState& st = detail::state(detail::CommServices(comm));
  std::lock_guard<std::mutex> lock(st.mu);
  st.algos = t;
}

bool coll_hierarchical(Comm& comm, CollKind kind, std::size_t count, DataType type) {
  detail::Request r;
  r.kind = kind;
  r.type = type;
  r.count = count;
  return detail::hierarchical(detail::state(detail::CommServices(comm)), r);
}

CollAlgo coll_algorithm(Comm& comm, CollKind kind, std::size_t count, DataType type) {
  const detail::CommServices core(comm);
  detail::CollState& st = detail::state(core);
  detail::Request r;
  r.kind = kind;
  r.type = type;
  r.count = count;
  CollComm cc;
  cc.dc = comm.device_handle();
  cc.team = comm.world();
  cc.ll_max = st.cfg.ll_max;
  cc.oneshot_max = st.cfg.oneshot_max;
  cc.remote_oneshot_max = st.cfg.remote_oneshot_max;
  cc.ch.ll_slot_bytes =
      detail::geometry(st.cfg, static_cast<std::size_t>(comm.size()), detail::largest_node(core))
          .ll_slot;
  return detail::resolve(st, cc, detail::full_args(comm, r));
}

}  // namespace gnio
