// The proxy transport over UCX (GNIO_NET=ucx): one proxy thread drains the ring in ticket order
// and turns each descriptor into one-sided UCX operations on memory every rank registered at
// allocation (transport/net/ucx/): a put is ucp_put_nbx into the peer's heap or landing inbox, a
// get ucp_get_nbx; a signal or atomic is a word message the peer's proxy applies and answers
// (GNIO_UCX_WORD_OPS=rma: an atomic ucp_atomic_op_nbx on the word, add or swap for signals). A
// worker fence between consecutive operations keeps the order the device API promises (a
// signal after its data, fence() free, gets after earlier puts); a ticket is done once UCX
// completed it at the target: gets and fetching atomics by their own completion, puts and
// posted atomics by a worker flush issued after them. No frames, acks or receiving threads: the
// peers' memory is written by UCX (by the NIC, or by the peer's worker progress on transports
// that emulate RMA, such as tcp, which the peer's proxy thread drives).
//
// Staged (a UCX that cannot reach GPU memory, or GNIO_PROXY_STAGING=always): the heap is not
// registered; puts and gets of peers' heaps go as request messages, one per chunk, whose data the
// proxies copy through host memory (the target lands a put, then its signal, before it answers),
// and nothing later is taken until the answer came, which keeps the order without fences.
//
// Built when UCX is found (-DGNIO_UCX=AUTO|ON); otherwise make_ucx_proxy() throws Unsupported
// and ucx_summary() says so.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/proxy/proxy.hpp"

namespace gnio::proxy {

/// A UCX proxy (collective over every rank). Throws Error(Unsupported) in a build without UCX,
/// and Error(InvalidArgument) when ranks disagree on staging.
std::unique_ptr<Proxy> make_ucx_proxy(const ProxyArgs& args);

/// What GNIO_NET=ucx would use on this machine, for gnio-info: the UCX version and how heap data
/// in GPU memory would move (registered directly, or staged through host memory), or why UCX is
/// not usable ("not in this build ...", a context that cannot be made).
std::string ucx_summary();

}  // namespace gnio::proxy
