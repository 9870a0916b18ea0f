// The real NCCL behind the drop-in (GNIO_NCCL_FALLBACK): loading it, the communicator of it that
// every drop-in communicator keeps beside its gnio one, and the plumbing of a call forwarded there.
#include <dlfcn.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "dropin.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace {

// The real NCCL calls some of its own exported functions (ncclGetUniqueId, ncclCommGetAsyncError,
// ncclMemAlloc, ncclDevCommDestroy, ...) through its PLT. With this library in the global scope
// (linked or LD_PRELOADed) those calls would land here with the real library's communicators;
// RTLD_DEEPBIND binds the library's references to its own definitions first. The sanitizers'
// runtimes abort a process that uses RTLD_DEEPBIND, so sanitizer builds go without it (their tests
// load a fake NCCL that does not rely on it).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kDeepBind = 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr int kDeepBind = 0;
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif

/// Points `fn` at `name` in `handle`; the first name that is missing is kept in *missing.
template <class Fn>
void bind(void* handle, Fn& fn, const char* name, std::string* missing) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr && missing->empty()) *missing = name;
}

/// Binds every entry point the drop-in forwards to; the first missing one's name, or empty.
std::string bind_all(gnio_nccl::Fallback* f) {
  std::string missing;
  void* h = f->handle;
  bind(h, f->GetVersion, "ncclGetVersion", &missing);
  bind(h, f->GetUniqueId, "ncclGetUniqueId", &missing);
  bind(h, f->CommInitRank, "ncclCommInitRank", &missing);
  bind(h, f->CommFinalize, "ncclCommFinalize", &missing);
  bind(h, f->CommDestroy, "ncclCommDestroy", &missing);
  bind(h, f->CommAbort, "ncclCommAbort", &missing);
  bind(h, f->CommGetAsyncError, "ncclCommGetAsyncError", &missing);
  bind(h, f->GetLastError, "ncclGetLastError", &missing);
  bind(h, f->AllReduce, "ncclAllReduce", &missing);
  bind(h, f->Reduce, "ncclReduce", &missing);
  bind(h, f->ReduceScatter, "ncclReduceScatter", &missing);
  bind(h, f->RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum", &missing);
  bind(h, f->RedOpDestroy, "ncclRedOpDestroy", &missing);
  bind(h, f->CommWindowRegister, "ncclCommWindowRegister", &missing);
  bind(h, f->CommWindowDeregister, "ncclCommWindowDeregister", &missing);
  bind(h, f->DevCommCreate, "ncclDevCommCreate", &missing);
  bind(h, f->DevCommDestroy, "ncclDevCommDestroy", &missing);
  return missing;
}

/// Why the library at f->path cannot be the fallback, or empty when it can.
std::string unusable(gnio_nccl::Fallback* f) {
  const std::string missing = bind_all(f);
  if (!missing.empty()) return "it has no " + missing + ", so it is not an NCCL 2.28 library";
  if (f->GetVersion(&f->version) != ncclSuccess) return "its ncclGetVersion failed";
  // The entry points and structures forwarded are those of nccl.h 2.28 (NCCL_VERSION_CODE).
  if (f->version / 100 != NCCL_VERSION_CODE / 100)
    return "it is NCCL " + std::to_string(f->version / 10000) + "." +
           std::to_string(f->version / 100 % 100) + "." + std::to_string(f->version % 100) +
           " (code " + std::to_string(f->version) + "); the drop-in forwards to NCCL " +
           std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + ".x only";
  return "";
}

}  // namespace

namespace gnio_nccl {

const Fallback* load_fallback() {
  static std::mutex mutex;
  // Loaded once and kept for the life of the process: its communicators may outlive any caller.
  static Fallback* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded != nullptr) return loaded;
  const std::string path = gnio::config_text("GNIO_NCCL_FALLBACK");
  if (path.empty()) return nullptr;
  auto refused = [&](const std::string& why) {
    return gnio::Error(gnio::ErrorClass::InvalidArgument,
                       "GNIO_NCCL_FALLBACK=" + path + " cannot be the fallback NCCL: " + why +
                           "; unset it or name a real NCCL 2.28 library (libnccl.so.2)");
  };
  // A library the process has loaded already (PyTorch links libnccl.so.2) had its references
  // bound then, where the drop-in may have come first; dlopen would hand back that copy.
  if (void* present = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
    const bool self =
        dlsym(present, "ncclGetVersion") == reinterpret_cast<void*>(&::ncclGetVersion);
    dlclose(present);
    throw refused(self ? "that is libgnio_nccl itself"
                       : "this process has loaded it already (the program or one of its libraries "
                         "links it), and its calls of its own functions may be bound to "
                         "libgnio_nccl; name a copy of the file at another path");
  }
  auto f = std::make_unique<Fallback>();
  f->path = path;
  f->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kDeepBind);
  if (f->handle == nullptr) {
    const char* e = dlerror();
    throw refused(std::string("dlopen failed: ") + (e != nullptr ? e : "no reason given"));
  }
  const std::string why = unusable(f.get());
  if (!why.empty()) {
    dlclose(f->handle);
    throw refused(why);
  }
  GNIO_INFO(Init, "NCCL drop-in: calls gnio does not carry run on %s (NCCL %d)", path.c_str(),
            f->version);
  loaded = f.release();
  return loaded;
}

ncclComm* make_comm(gnio::Comm c, const Fallback* fallback) {
  auto comm = std::make_unique<ncclComm>(std::move(c));
  if (fallback == nullptr) return comm.release();
  comm->fallback = fallback;
  gnio::Bootstrap& bs = comm->comm.bootstrap();
  const int rank = bs.rank(), size = bs.size();
  std::string why;  // this rank's failure, in words
  std::vector<int> results(static_cast<std::size_t>(size));
  try {
    // Rank 0's real unique id, or its failure to get one, reaches every rank.
    struct {
      ncclResult_t result;
      ncclUniqueId id;
    } root{};
    if (rank == 0) {
      root.result = fallback->GetUniqueId(&root.id);
      if (root.result != ncclSuccess)
        why = std::string("ncclGetUniqueId: ") + fallback->GetLastError(nullptr);
    }
    bs.broadcast(&root, sizeof(root), 0);
    ncclResult_t mine = root.result;
    if (mine == ncclSuccess) {
      mine = fallback->CommInitRank(&comm->real, size, root.id, rank);
      if (mine != ncclSuccess) {
        why = std::string("ncclCommInitRank: ") + fallback->GetLastError(nullptr);
        comm->real = nullptr;
      }
    } else if (rank != 0) {
      why = "rank 0 got no unique id from it";
    }
    // All keep theirs or none does.
    results[static_cast<std::size_t>(rank)] = mine;
    bs.allgather(results.data(), sizeof(int));
  } catch (...) {
    if (comm->real != nullptr) fallback->CommAbort(comm->real);
    comm->comm.abort();  // the bootstrap failed: no collective teardown
    throw;
  }
  const auto failed = std::find_if(results.begin(), results.end(), [](int r) { return r != 0; });
  if (failed == results.end()) return comm.release();
  if (comm->real != nullptr) fallback->CommAbort(comm->real);
  comm->real = nullptr;
  const int who = static_cast<int>(failed - results.begin());
  if (why.empty())
    throw gnio::Error(gnio::ErrorClass::RemoteError,
                      "rank " + std::to_string(who) + " could not create the communicator of " +
                          fallback->path + " (GNIO_NCCL_FALLBACK) beside gnio's (NCCL result " +
                          std::to_string(*failed) + "; its log says why)");
  throw gnio::Error(gnio::ErrorClass::SystemError,
                    "rank " + std::to_string(rank) + " could not create the communicator of " +
                        fallback->path + " (GNIO_NCCL_FALLBACK) beside gnio's: " + why);
}

ncclResult_t refuse(const char* call, const char* why) {
  return fail(ncclInvalidUsage,
              "%s: %s (set GNIO_NCCL_FALLBACK to a real libnccl.so.2 to run it there)", call, why);
}

void note_fallback(const ncclComm& comm, const char* call, const char* why) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::string kind = std::string(call) + ": " + why;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!said.insert(kind).second) return;
  }
  GNIO_WARN(Coll, "%s; it runs on the real NCCL, GNIO_NCCL_FALLBACK=%s (said once)", kind.c_str(),
            comm.fallback->path.c_str());
}

ncclResult_t forwarded(const ncclComm& comm, const char* call, ncclResult_t result) {
  if (result == ncclSuccess || result == ncclInProgress) return result;
  return fail(result, "%s on the real NCCL (%s): %s", call, comm.fallback->path.c_str(),
              comm.fallback->GetLastError(comm.real));
}

}  // namespace gnio_nccl
