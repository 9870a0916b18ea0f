// create_unique_id() and the unique id's text form.
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "base/fail.hpp"
#include "bootstrap/root_service.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/log.hpp"

namespace gnio {
namespace {

// Root services started by create_unique_id(). Finished ones are joined on the next call; the
// rest are stopped and joined at process exit. A forked child inherits this object but not the
// threads, so it must not join them: it leaks them instead.
class RootRegistry {
 public:
  static RootRegistry& get() {
    static RootRegistry registry;
    return registry;
  }

  void add(std::unique_ptr<bootstrap::RootService> root) {
    std::vector<std::unique_ptr<bootstrap::RootService>> finished;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (::getpid() != owner_) {  // in a forked child: forget the parent's services
        for (auto& r : roots_) (void)r.release();
        roots_.clear();
        owner_ = ::getpid();
      }
      for (auto& r : roots_)
        if (r->finished()) finished.push_back(std::move(r));
      std::erase(roots_, nullptr);
      roots_.push_back(std::move(root));
    }
    // `finished` joins here, outside the lock.
  }

  ~RootRegistry() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (::getpid() != owner_)
      for (auto& r : roots_) (void)r.release();
    roots_.clear();
  }

 private:
  std::mutex mutex_;
  pid_t owner_ = ::getpid();
  std::vector<std::unique_ptr<bootstrap::RootService>> roots_;
};

std::uint64_t random_token() {
  std::uint64_t token = 0;
  auto* p = reinterpret_cast<unsigned char*>(&token);
  std::size_t got = 0;
  while (got < sizeof(token)) {
    ssize_t n = ::getrandom(p + got, sizeof(token) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno("create_unique_id: getrandom");
    got += static_cast<std::size_t>(n);
  }
  return token;
}

}  // namespace

UniqueId create_unique_id() {
  bootstrap::SockAddr bind_addr = bootstrap::choose_root_address();
  GNIO_REQUIRE(!bind_addr.is_wildcard(),
               "create_unique_id: the root needs a concrete address that ranks can connect to, "
               "not %s; set GNIO_BOOTSTRAP_ADDR to one of this host's addresses",
               bind_addr.host_string().c_str());
  std::uint64_t token = random_token();
  auto root = std::make_unique<bootstrap::RootService>(bind_addr, token);
  UniqueId id;
  bootstrap::encode_unique_id({root->address().to_net(), token}, id.bytes);
  RootRegistry::get().add(std::move(root));
  return id;
}

std::string to_string(const UniqueId& id) {
  return bootstrap::hex_encode(id.bytes, sizeof(id.bytes));
}

UniqueId unique_id_from_string(const std::string& text) {
  std::size_t begin = text.find_first_not_of(" \t\r\n");
  std::size_t end = text.find_last_not_of(" \t\r\n");
  std::string_view hex = begin == std::string::npos
                             ? std::string_view()
                             : std::string_view(text).substr(begin, end - begin + 1);
  constexpr std::size_t kDigits = 2 * sizeof(UniqueId::bytes);
  GNIO_REQUIRE(hex.size() == kDigits,
               "unique_id_from_string: a unique id is %zu hex digits, this text has %zu "
               "characters; pass to_string()'s output unchanged",
               kDigits, hex.size());
  auto bytes = bootstrap::hex_decode(hex);
  if (!bytes) {
    std::size_t bad = hex.find_first_not_of("0123456789abcdefABCDEF");
    fail(ErrorClass::InvalidArgument,
         "unique_id_from_string: character %zu ('%c') is not a hex digit", bad,
         bad < hex.size() ? hex[bad] : '?');
  }
  auto fields = bootstrap::decode_unique_id(bytes->data(), bytes->size());
  if (!fields) {
    bool is_gnio = std::memcmp(bytes->data(), "GNid", 4) == 0;
    fail(ErrorClass::InvalidArgument, "unique_id_from_string: %s",
         is_gnio ? "the text is a damaged gnio unique id, or one from an incompatible gnio "
                   "version (checksum, version or address check failed)"
                 : "the text is not a gnio unique id (wrong magic)");
  }
  UniqueId id;
  std::memcpy(id.bytes, bytes->data(), sizeof(id.bytes));
  return id;
}

}  // namespace gnio
