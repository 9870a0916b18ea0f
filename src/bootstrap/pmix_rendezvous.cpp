#include "bootstrap/pmix_rendezvous.hpp"

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/dynamic_library.hpp"
#include "base/fail.hpp"
#include "bootstrap/root_service.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

#if GNIO_HAVE_PMIX
#include <pmix.h>
#endif

namespace gnio::bootstrap {

bool pmix_launched() {
  const char* nspace = std::getenv("PMIX_NAMESPACE");
  const char* rank = std::getenv("PMIX_RANK");
  return nspace && *nspace && rank && *rank;
}

#if GNIO_HAVE_PMIX

namespace {

constexpr const char* kRootKey = "gnio.bootstrap.root";

/// The PMIx client calls the rendezvous makes, from libpmix.so.2: loaded once and never unloaded
/// (PMIx runs threads of its own), RTLD_GLOBAL because its plugins resolve symbols in it.
struct PmixLibrary {
  std::string error;  ///< why it could not be loaded; empty when every call below is there
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence) fence = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Error_string) error_string = nullptr;
  decltype(&PMIx_Info_load) info_load = nullptr;
  decltype(&PMIx_Value_destruct) value_destruct = nullptr;

  static const PmixLibrary& get_library() {
    static const PmixLibrary library = [] {
      PmixLibrary l;
      void* h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
      if (!h) {
        const char* e = dlerror();
        l.error = std::string("libpmix.so.2 cannot be loaded (") + (e ? e : "?") +
                  "; Debian: apt-get install libpmix2)";
        return l;
      }
      auto bind = [&](auto& fn, const char* name) {
        bind_symbol(h, fn, name, "libpmix.so.2", &l.error);
      };
      bind(l.init, "PMIx_Init");
      bind(l.finalize, "PMIx_Finalize");
      bind(l.put, "PMIx_Put");
      bind(l.commit, "PMIx_Commit");
      bind(l.fence, "PMIx_Fence");
      bind(l.get, "PMIx_Get");
      bind(l.error_string, "PMIx_Error_string");
      bind(l.info_load, "PMIx_Info_load");
      bind(l.value_destruct, "PMIx_Value_destruct");
      return l;
    }();
    return library;
  }

  void check(pmix_status_t status, const char* call, const LaunchInfo& info) const {
    if (status == PMIX_SUCCESS) return;
    fail(status == PMIX_ERR_TIMEOUT ? ErrorClass::Timeout : ErrorClass::SystemError,
         "bootstrap: rank %d of %d (%s job, PMIx %s): %s failed: %s%s", info.rank, info.size,
         info.source.c_str(), std::getenv("PMIX_VERSION") ? std::getenv("PMIX_VERSION") : "?", call,
         error_string(status),
         status == PMIX_ERR_TIMEOUT
             ? " (GNIO_BOOTSTRAP_TIMEOUT passed: did every rank of the job start and reach it?)"
             : "");
  }
};

}  // namespace

std::string pmix_unavailable_reason() {
  return PmixLibrary::get_library().error;
}

std::unique_ptr<Bootstrap> join_through_pmix(const LaunchInfo& info, std::uint64_t token) {
  const PmixLibrary& lib = PmixLibrary::get_library();
  if (!lib.error.empty())
    fail(ErrorClass::Unsupported, "bootstrap: the PMIx rendezvous is unavailable: %s",
         lib.error.c_str());
  pmix_proc_t me{};
  lib.check(lib.init(&me, nullptr, 0), "PMIx_Init", info);
  // Only the exchange below needs PMIx; an MPI library in this process holds its own reference.
  struct Finalize {
    const PmixLibrary& lib;
    ~Finalize() { (void)lib.finalize(nullptr, 0); }
  } finalize{lib};
  GNIO_REQUIRE(static_cast<int>(me.rank) == info.rank,
               "bootstrap: PMIx says this is rank %u, the %s environment says rank %d", me.rank,
               info.source.c_str(), info.rank);

  std::unique_ptr<RootService> root;
  SockAddr root_at;
  if (info.rank == 0) {
    const bool one_host = info.local_size == info.size;
    root = std::make_unique<RootService>(
        one_host ? SockAddr::resolve("127.0.0.1", 0, "loopback") : choose_root_address(), token);
    root_at = root->address();
    std::string text = root_at.host_string() + " " + std::to_string(root_at.port());
    pmix_value_t value{};
    value.type = PMIX_STRING;
    value.data.string = text.data();
    lib.check(lib.put(PMIX_GLOBAL, kRootKey, &value), "PMIx_Put", info);
    lib.check(lib.commit(), "PMIx_Commit", info);
    GNIO_INFO(Bootstrap, "%s job: root at %s, published through PMIx (namespace %s)",
              info.source.c_str(), root_at.to_string().c_str(), me.nspace);
  }
  // Every rank of the namespace, rank 0's value collected; bounded by the bootstrap timeout.
  pmix_proc_t everyone = me;
  everyone.rank = PMIX_RANK_WILDCARD;
  pmix_info_t directives[2];
  std::memset(directives, 0, sizeof(directives));
  bool collect = true;
  const double limit_s = config_seconds("GNIO_BOOTSTRAP_TIMEOUT");
  int timeout_s = limit_s > 0 ? static_cast<int>(std::ceil(limit_s)) : 0;
  lib.check(lib.info_load(&directives[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL), "PMIx_Info_load",
            info);
  lib.check(lib.info_load(&directives[1], PMIX_TIMEOUT, &timeout_s, PMIX_INT), "PMIx_Info_load",
            info);
  lib.check(lib.fence(&everyone, 1, directives, timeout_s > 0 ? 2 : 1), "PMIx_Fence", info);
  if (info.rank != 0) {
    pmix_proc_t zero = me;
    zero.rank = 0;
    pmix_value_t* got = nullptr;
    lib.check(lib.get(&zero, kRootKey, nullptr, 0, &got), "PMIx_Get of rank 0's root address",
              info);
    char host[256] = "";
    unsigned port = 0;
    const bool parsed = got->type == PMIX_STRING && got->data.string &&
                        std::sscanf(got->data.string, "%255s %u", host, &port) == 2 && port > 0 &&
                        port <= 65535;
    lib.value_destruct(got);
    std::free(got);
    GNIO_REQUIRE(parsed, "bootstrap: rank 0's %s under PMIx is not \"host port\"", kRootKey);
    root_at = SockAddr::resolve(host, static_cast<std::uint16_t>(port), "the PMIx root");
  }
  return TcpBootstrap::join(root_at, token, info.rank, info.size, std::move(root));
}

#else  // !GNIO_HAVE_PMIX

std::string pmix_unavailable_reason() {
  return "this gnio was built without PMIx's headers (Debian: libpmix-dev)";
}

std::unique_ptr<Bootstrap> join_through_pmix(const LaunchInfo& /*info*/, std::uint64_t /*token*/) {
  fail(ErrorClass::Unsupported, "bootstrap: the PMIx rendezvous is unavailable: %s",
       pmix_unavailable_reason().c_str());
}

#endif

}  // namespace gnio::bootstrap
