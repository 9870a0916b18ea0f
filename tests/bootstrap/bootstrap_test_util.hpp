// Helpers for the bootstrap tests: ranks as forked child processes, a root hosted by a child, and
// raw TCP clients that misbehave on purpose.
//
// Children report through their exit status: 0 = passed, 3 = a CHILD_CHECK failed,
// 10 + ErrorClass = an uncaught gnio::Error of that class, 2 = another exception, 128 + signal.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"

namespace gnio::test {

/// Exit code of a child that died of an uncaught gnio::Error of class `c`.
constexpr int exit_code(ErrorClass c) {
  return 10 + static_cast<int>(c);
}

/// In a child: fail (exit code 3) with a message when `cond` is false.
#define CHILD_CHECK(cond)                                                           \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 3;                                                                     \
    }                                                                               \
  } while (0)

/// Seconds on the steady clock since `t`.
inline double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Removes every launcher variable a test could inherit (from CI under Slurm, or gnio-run), so
/// each child starts from a known environment.
inline void clear_launcher_env() {
  static const char* kNames[] = {"RANK",
                                 "WORLD_SIZE",
                                 "LOCAL_RANK",
                                 "LOCAL_WORLD_SIZE",
                                 "MASTER_ADDR",
                                 "MASTER_PORT",
                                 "GROUP_RANK",
                                 "TORCHELASTIC_RUN_ID",
                                 "OMPI_COMM_WORLD_RANK",
                                 "OMPI_COMM_WORLD_SIZE",
                                 "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE",
                                 "OMPI_MCA_orte_ess_jobid",
                                 "OMPI_MCA_ess_base_jobid",
                                 "PMIX_NAMESPACE",
                                 "SLURM_PROCID",
                                 "SLURM_NTASKS",
                                 "SLURM_LOCALID",
                                 "SLURM_NTASKS_PER_NODE",
                                 "SLURM_STEP_TASKS_PER_NODE",
                                 "SLURM_NODEID",
                                 "SLURM_JOB_ID",
                                 "SLURM_STEP_ID",
                                 "PMI_RANK",
                                 "PMI_SIZE",
                                 "MPI_LOCALRANKID",
                                 "MPI_LOCALNRANKS",
                                 "GNIO_BOOTSTRAP_ADDR",
                                 "GNIO_BOOTSTRAP_PORT",
                                 "GNIO_JOB_TOKEN",
                                 "GNIO_SOCKET_IFNAME"};
  for (const char* n : kNames) ::unsetenv(n);
}

/// Runs body() in a forked child bounded by alarm(limit_s) and returns its exit code (above).
inline int child_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

[[noreturn]] inline void run_child_body(const std::function<int()>& body, int label,
                                        unsigned limit_s) {
  ::alarm(limit_s);
  int code = 2;
  try {
    code = body();
  } catch (const Error& e) {
    std::fprintf(stderr, "[child %d] %s\n", label, e.what());
    code = exit_code(e.error_class());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[child %d] exception: %s\n", label, e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);  // no static destructors: they belong to the parent
}

/// Forks one child per entry of `ranks`; child i runs body(ranks[i]). `during` (optional) runs in
/// the parent once all are started, with their pids. Waits at most limit_s + 5 s, then kills the
/// rest. Returns the exit codes, in the order of `ranks`.
inline std::vector<int> run_ranks(
    const std::vector<int>& ranks, const std::function<int(int)>& body, unsigned limit_s = 30,
    const std::function<void(const std::vector<pid_t>&)>& during = {}) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r : ranks) {
    pid_t pid = ::fork();
    if (pid == 0) run_child_body([&] { return body(r); }, r, limit_s);
    pids.push_back(pid);
  }
  if (during) during(pids);
  std::vector<int> codes(pids.size(), -1);
  auto start = std::chrono::steady_clock::now();
  std::size_t left = pids.size();
  while (left > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = child_exit_code(status);
        --left;
      }
    }
    if (left && since(start) > limit_s + 5.0) {
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1) {
          ::kill(pids[i], SIGKILL);
          int status = 0;
          ::waitpid(pids[i], &status, 0);
          codes[i] = 999;  // hung: never acceptable
        }
      break;
    }
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return codes;
}

/// 0..n-1.
inline std::vector<int> iota_ranks(int n) {
  std::vector<int> r(n);
  for (int i = 0; i < n; ++i) r[i] = i;
  return r;
}

/// A root service hosted by a separate child process, so the test process itself stays
/// single-threaded while it forks ranks and attacks the root (forking a process whose other
/// threads may hold a lock is what this avoids). Killed on destruction.
class RootHost {
 public:
  explicit RootHost(const std::vector<std::string>& env = {}) {
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
      UniqueId id = create_unique_id();
      if (::write(fds[1], id.bytes, sizeof(id.bytes)) != sizeof(id.bytes)) ::_exit(1);
      ::close(fds[1]);
      for (;;) ::pause();
    }
    ::close(fds[1]);
    std::size_t got = 0;
    while (got < sizeof(id_.bytes)) {
      ssize_t n = ::read(fds[0], id_.bytes + got, sizeof(id_.bytes) - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(fds[0]);
    EXPECT_EQ(got, sizeof(id_.bytes)) << "the root host did not send a unique id";
  }
  ~RootHost() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  const UniqueId& id() const { return id_; }
  bootstrap::UniqueIdFields fields() const {
    return *bootstrap::decode_unique_id(id_.bytes, sizeof(id_.bytes));
  }
  bootstrap::SockAddr address() const { return bootstrap::SockAddr::from_net(fields().root); }

 private:
  pid_t pid_ = -1;
  UniqueId id_{};
};

/// A raw TCP connection to `to` (blocking writes), for misbehaving clients. Empty on failure.
inline bootstrap::Fd raw_connect(const bootstrap::SockAddr& to) {
  int err = 0;
  return bootstrap::connect_tcp(to, Deadline::after(2.0), &err);
}

/// Writes bytes, ignoring errors (the other side may have dropped us already).
inline void raw_send(const bootstrap::Fd& fd, const void* data, std::size_t len) {
  int err = 0;
  bootstrap::send_all(fd.get(), data, len, nullptr, 0, Deadline::after(1.0), &err);
}

/// A hello as bytes.
inline std::vector<unsigned char> hello_bytes(bootstrap::Purpose purpose, std::uint64_t token,
                                              int rank, int size) {
  std::vector<unsigned char> b(bootstrap::kHelloBytes);
  bootstrap::encode_hello({purpose, token, rank, size}, b.data());
  return b;
}

/// A frame header as bytes.
inline std::vector<unsigned char> frame_bytes(bootstrap::FrameType type, int src,
                                              std::uint64_t length) {
  std::vector<unsigned char> b(bootstrap::kFrameHeaderBytes);
  bootstrap::encode_frame_header({type, 0, src, 0, length}, b.data());
  return b;
}

/// Every kind of stray client the listeners must survive, aimed at `to`. Connections that must
/// stay open (stalled half-hellos) are appended to `keep`.
inline void attack(const bootstrap::SockAddr& to, std::uint64_t token, int size,
                   bootstrap::Purpose purpose, std::vector<bootstrap::Fd>& keep) {
  using namespace bootstrap;
  // Port scan: connect, then close without a byte.
  for (int i = 0; i < 3; ++i) raw_connect(to);
  // Garbage.
  {
    Fd fd = raw_connect(to);
    std::vector<unsigned char> junk(1500);
    for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<unsigned char>(i * 131 + 7);
    raw_send(fd, junk.data(), junk.size());
  }
  // An HTTP client.
  {
    Fd fd = raw_connect(to);
    const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_send(fd, req, sizeof(req) - 1);
  }
  // Right magic, wrong version / nonsense fields.
  {
    Fd fd = raw_connect(to);
    std::vector<unsigned char> h = hello_bytes(purpose, token, 0, size);
    h[4] = 0x7f;  // version
    raw_send(fd, h.data(), h.size());
  }
  // Another job's token.
  {
    Fd fd = raw_connect(to);
    std::vector<unsigned char> h = hello_bytes(purpose, token ^ 0x5a5a5a5a5a5a5a5aull, 0, size);
    raw_send(fd, h.data(), h.size());
    std::vector<unsigned char> f = frame_bytes(FrameType::Register, 0, kRankRecordBytes);
    raw_send(fd, f.data(), f.size());
  }
  // Slowloris: half a hello, then silence (kept open by the caller).
  {
    Fd fd = raw_connect(to);
    std::vector<unsigned char> h = hello_bytes(purpose, token, 0, size);
    raw_send(fd, h.data(), h.size() / 2);
    keep.push_back(std::move(fd));
  }
  // Slowloris without a single byte.
  keep.push_back(raw_connect(to));
}

}  // namespace gnio::test
