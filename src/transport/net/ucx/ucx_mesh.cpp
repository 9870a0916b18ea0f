#include "transport/net/ucx/ucx_mesh.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/fail.hpp"
#include "bootstrap/agree_step.hpp"
#include "gnio/log.hpp"

namespace gnio::net {

std::string ucx_status(ucs_status_t status) {
  return ucs_status_string(status);
}

UcxMesh::UcxMesh(Bootstrap& bs, const std::vector<int>& node_of_rank, ErrorHandler on_error)
    : bootstrap_(bs), rank_(bs.rank()), on_error_(std::move(on_error)) {
  const int size = bs.size();
  eps_.assign(static_cast<std::size_t>(size), nullptr);
  for (int r = 0; r < size; ++r)
    if (node_of_rank[r] != node_of_rank[rank_]) peers_.push_back(r);

  // The local part can fail on one rank only (its UCX_TLS, its devices): every rank learns it and
  // fails alike, instead of the others waiting for its address.
  ucp_address_t* address = nullptr;
  std::size_t address_bytes = 0;
  std::exception_ptr local;
  try {
    start(&address, &address_bytes);
  } catch (...) {
    local = std::current_exception();
  }
  agree_step(bs, local, "the ucx transport's setup", [&] {
    if (address) ucp_worker_release_address(worker_, address);
    address = nullptr;
    close_worker();
  });
  std::vector<std::vector<char>> addresses;
  try {
    addresses = allgather_blobs(address, address_bytes);
  } catch (...) {
    ucp_worker_release_address(worker_, address);
    close_worker();
    throw;
  }
  ucp_worker_release_address(worker_, address);

  local = nullptr;
  try {
    for (int p : peers_) {
      tags_.push_back(std::make_unique<EndpointTag>(EndpointTag{this, p}));
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(addresses[p].data());
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &UcxMesh::on_endpoint_error;
      ep.err_handler.arg = tags_.back().get();
      const ucs_status_t st = ucp_ep_create(worker_, &ep, &eps_[static_cast<std::size_t>(p)]);
      if (st != UCS_OK) {
        eps_[static_cast<std::size_t>(p)] = nullptr;
        fail(ErrorClass::SystemError,
             "rank %d: ucx transport: no endpoint to rank %d: %s (UCX found no transport that "
             "reaches it; check UCX_TLS / UCX_NET_DEVICES)",
             rank_, p, ucx_status(st).c_str());
      }
    }
  } catch (...) {
    local = std::current_exception();
  }
  agree_step(bs, local, "connecting the ucx transport", [&] {
    close(1.0);
    close_worker();
  });
  GNIO_INFO(Net, "rank %d: %s, endpoints to %zu remote rank(s)", rank_, describe().c_str(),
            peers_.size());
}

namespace {

/// A UCX context with what this backend asks of UCX (UCX_* variables honoured); "" or what failed.
std::string init_context(ucp_context_h* context) {
  *context = nullptr;
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return "reading UCX's configuration failed: " + ucx_status(st);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features =
      UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  st = ucp_init(&params, config, context);
  ucp_config_release(config);
  if (st == UCS_OK) return "";
  *context = nullptr;
  return "ucp_init failed: " + ucx_status(st) + " (check UCX_TLS / UCX_NET_DEVICES)";
}

/// Whether `context` can register and move GPU (CUDA) memory.
bool reaches_cuda(ucp_context_h context) {
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  return ucp_context_query(context, &attr) == UCS_OK &&
         (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

}  // namespace

UcxLibrary UcxMesh::probe() {
  UcxLibrary library;
  library.version = ucp_get_version_string();
  ucp_context_h context = nullptr;
  library.error = init_context(&context);
  if (context) {
    library.reaches_cuda_memory = reaches_cuda(context);
    ucp_cleanup(context);
  }
  return library;
}

void UcxMesh::start(ucp_address_t** address, std::size_t* address_bytes) {
  const std::string failed = init_context(&context_);
  if (!failed.empty())
    fail(ErrorClass::SystemError, "rank %d: ucx transport: %s", rank_, failed.c_str());
  cuda_ = reaches_cuda(context_);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  ucs_status_t st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    worker_ = nullptr;
    fail(ErrorClass::SystemError, "rank %d: ucx transport: ucp_worker_create failed: %s", rank_,
         ucx_status(st).c_str());
  }
  ucp_worker_attr_t wattr{};
  wattr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
  if (ucp_worker_query(worker_, &wattr) == UCS_OK && wattr.thread_mode != UCS_THREAD_MODE_MULTI)
    fail(ErrorClass::Unsupported,
         "rank %d: ucx transport: this UCX (%s) has no multi-threaded workers (built without "
         "--enable-mt); gnio registers memory from the application's thread while its proxy "
         "thread progresses the worker",
         rank_, ucp_get_version_string());
  st = ucp_worker_get_address(worker_, address, address_bytes);
  if (st != UCS_OK)
    fail(ErrorClass::SystemError, "rank %d: ucx transport: ucp_worker_get_address failed: %s",
         rank_, ucx_status(st).c_str());
}

void UcxMesh::on_active_message(unsigned id, ucp_am_recv_callback_t on_message, void* arg) {
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                     UCP_AM_HANDLER_PARAM_FIELD_ARG;
  param.id = id;
  param.cb = on_message;
  param.arg = arg;
  const ucs_status_t st = ucp_worker_set_am_recv_handler(worker_, &param);
  if (st != UCS_OK)
    fail(ErrorClass::SystemError,
         "rank %d: ucx transport: ucp_worker_set_am_recv_handler(%u) failed: %s", rank_, id,
         ucx_status(st).c_str());
}

void UcxMesh::close_worker() {
  if (worker_) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (context_) ucp_cleanup(context_);
  context_ = nullptr;
}

UcxMesh::~UcxMesh() {
  close(1.0);
  close_worker();
}

std::string UcxMesh::describe() const {
  return format("ucx transport (UCX %s, GPU memory %s)", ucp_get_version_string(),
                cuda_ ? "registered directly" : "not reachable: no CUDA support");
}

void UcxMesh::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* tag = static_cast<EndpointTag*>(arg);
  if (tag->mesh->on_error_) tag->mesh->on_error_(tag->peer, ucx_status(status));
}

std::vector<std::vector<char>> UcxMesh::allgather_blobs(const void* blob, std::size_t bytes) {
  const int size = bootstrap_.size();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(size));
  sizes[static_cast<std::size_t>(rank_)] = bytes;
  bootstrap_.allgather(sizes.data(), sizeof(std::uint64_t));
  const std::size_t widest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> all(widest * static_cast<std::size_t>(size));
  if (bytes) std::memcpy(all.data() + widest * static_cast<std::size_t>(rank_), blob, bytes);
  if (widest) bootstrap_.allgather(all.data(), widest);
  std::vector<std::vector<char>> out(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const char* from = all.data() + widest * static_cast<std::size_t>(r);
    out[static_cast<std::size_t>(r)].assign(from, from + sizes[static_cast<std::size_t>(r)]);
  }
  return out;
}

std::unique_ptr<UcxMesh::Region> UcxMesh::expose(void* base, std::uint64_t bytes,
                                                 bool device_memory) {
  auto region = std::make_unique<Region>();
  region->bytes = bytes;
  const int size = bootstrap_.size();
  region->remote_base.assign(static_cast<std::size_t>(size), 0);
  region->rkey.assign(static_cast<std::size_t>(size), nullptr);
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                  UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  mp.address = base;
  mp.length = bytes;
  mp.memory_type = device_memory ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  ucs_status_t st = ucp_mem_map(context_, &mp, &region->memh);
  // Every rank learns every failure (a rank that failed alone would leave the others waiting in
  // the exchange below).
  std::vector<std::int32_t> ok(static_cast<std::size_t>(size));
  ok[static_cast<std::size_t>(rank_)] = st == UCS_OK;
  bootstrap_.allgather(ok.data(), sizeof(std::int32_t));
  for (int r = 0; r < size; ++r)
    if (!ok[static_cast<std::size_t>(r)]) {
      if (st == UCS_OK) ucp_mem_unmap(context_, region->memh);
      fail(ErrorClass::SystemError,
           "rank %d: ucx transport: registering %llu bytes of %s memory failed on rank %d%s%s",
           rank_, static_cast<unsigned long long>(bytes), device_memory ? "GPU" : "host", r,
           r == rank_ ? ": " : "", r == rank_ ? ucx_status(st).c_str() : " (see its log)");
    }
  void* packed = nullptr;
  std::size_t packed_bytes = 0;
  st = ucp_rkey_pack(context_, region->memh, &packed, &packed_bytes);
  GNIO_REQUIRE(st == UCS_OK, "rank %d: ucx transport: ucp_rkey_pack failed: %s", rank_,
               ucx_status(st).c_str());
  // The key, then the region's address here.
  std::vector<char> blob(packed_bytes + sizeof(std::uint64_t));
  const auto address = reinterpret_cast<std::uint64_t>(base);
  std::memcpy(blob.data(), &address, sizeof(address));
  std::memcpy(blob.data() + sizeof(address), packed, packed_bytes);
  ucp_rkey_buffer_release(packed);
  const std::vector<std::vector<char>> blobs = allgather_blobs(blob.data(), blob.size());
  for (int p : peers_) {
    const std::vector<char>& b = blobs[static_cast<std::size_t>(p)];
    std::memcpy(&region->remote_base[static_cast<std::size_t>(p)], b.data(), sizeof(address));
    st = ucp_ep_rkey_unpack(eps_[static_cast<std::size_t>(p)], b.data() + sizeof(address),
                            &region->rkey[static_cast<std::size_t>(p)]);
    GNIO_REQUIRE(st == UCS_OK, "rank %d: ucx transport: the memory key of rank %d is unusable: %s",
                 rank_, p, ucx_status(st).c_str());
  }
  return region;
}

void UcxMesh::release(Region& region) {
  for (ucp_rkey_h& k : region.rkey)
    if (k) {
      ucp_rkey_destroy(k);
      k = nullptr;
    }
  if (region.memh) {
    ucp_mem_unmap(context_, region.memh);
    region.memh = nullptr;
  }
}

void UcxMesh::close(double timeout_s) {
  std::vector<ucs_status_ptr_t> closing;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  for (ucp_ep_h& ep : eps_) {
    if (!ep) continue;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &param);
    if (r && UCS_PTR_IS_PTR(r)) closing.push_back(r);
    ep = nullptr;
  }
  using Clock = std::chrono::steady_clock;
  const auto until =
      Clock::now() + std::chrono::microseconds(static_cast<long long>(timeout_s * 1e6));
  for (ucs_status_ptr_t r : closing) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < until)
      ucp_worker_progress(worker_);
    ucp_request_free(r);
  }
  // A forced close can return before its endpoint is gone: when the endpoint still had sends in
  // flight (a peer that died mid-stream), UCX discards its transport endpoint on later progress
  // and only then frees it. Destroying the worker before that aborts the process inside UCX
  // 1.13 (ucp_ep_delete: "refcounts.create == 1" failed; CI, 2026-12-07). So the worker runs
  // until it has had nothing to do for a while, within the same deadline (a heuristic: UCX offers
  // no way to ask whether its endpoints are gone; 4 aborts in 200 stressed runs before, 0 after).
  const auto quiet_for = std::chrono::milliseconds(2);
  auto quiet_since = Clock::now();
  while (worker_ && Clock::now() < until && Clock::now() - quiet_since < quiet_for)
    if (ucp_worker_progress(worker_) != 0) quiet_since = Clock::now();
}

}  // namespace gnio::net
