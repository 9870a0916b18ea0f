// launch_info_from_env(), the job token and Bootstrap::from_env(), each in a child process whose
// environment the test sets (the test process's own environment is never touched).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/launch_env.hpp"
#include "bootstrap_test_util.hpp"
#include "gnio/bootstrap.hpp"

namespace gnio::test {
namespace {

using Env = std::vector<std::pair<const char*, const char*>>;

void set_env(const Env& env) {
  clear_launcher_env();
  for (const auto& [k, v] : env) ::setenv(k, v, 1);
}

/// Runs body() in a child with exactly the launcher variables in `env`.
int in_child(const Env& env, const std::function<int()>& body) {
  return run_ranks(
      {0},
      [&](int) {
        set_env(env);
        return body();
      },
      20)[0];
}

/// In a child: true when fn throws InvalidArgument whose message contains `words`.
bool throws_invalid(const std::function<void()>& fn, const char* words) {
  try {
    fn();
  } catch (const Error& e) {
    if (e.error_class() == ErrorClass::InvalidArgument &&
        std::string(e.what()).find(words) != std::string::npos)
      return true;
    std::fprintf(stderr, "unexpected error (wanted InvalidArgument with '%s'): %s\n", words,
                 e.what());
    return false;
  }
  std::fprintf(stderr, "no error (wanted InvalidArgument with '%s')\n", words);
  return false;
}

TEST(LaunchEnv, Torchrun) {
  EXPECT_EQ(0, in_child({{"RANK", "2"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "0"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "10.1.2.3"},
                         {"MASTER_PORT", "29500"},
                         {"TORCHELASTIC_RUN_ID", "job-17"},
                         {"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_SIZE", "9"}},
                        [] {
                          LaunchInfo i = launch_info_from_env();
                          CHILD_CHECK(i.source == "torchrun");  // before Open MPI in the order
                          CHILD_CHECK(i.rank == 2 && i.size == 4);
                          CHILD_CHECK(i.local_rank == 0 && i.local_size == 2);
                          CHILD_CHECK(i.root_host == "10.1.2.3" && i.root_port == 29501);
                          return 0;
                        }));
}

TEST(LaunchEnv, GnioRunWithPortOverride) {
  EXPECT_EQ(0, in_child({{"RANK", "0"},
                         {"WORLD_SIZE", "1"},
                         {"MASTER_ADDR", "127.0.0.1"},
                         {"MASTER_PORT", "29500"},
                         {"GNIO_JOB_TOKEN", "00ff00ff00ff00ff"},
                         {"GNIO_BOOTSTRAP_PORT", "31000"}},
                        [] {
                          LaunchInfo i = launch_info_from_env();
                          CHILD_CHECK(i.source == "gnio-run");
                          CHILD_CHECK(i.local_rank == -1 && i.local_size == 0);
                          CHILD_CHECK(i.root_port == 31000);
                          CHILD_CHECK(bootstrap::job_token_from_env(i) == 0x00ff00ff00ff00ffull);
                          return 0;
                        }));
}

TEST(LaunchEnv, OpenMpiTakesTheRootFromGnioVariables) {
  EXPECT_EQ(0, in_child({{"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                         {"GNIO_BOOTSTRAP_ADDR", "10.9.9.9"},
                         {"GNIO_BOOTSTRAP_PORT", "4000"},
                         {"SLURM_PROCID", "0"},
                         {"SLURM_NTASKS", "1"}},
                        [] {
                          LaunchInfo i = launch_info_from_env();
                          CHILD_CHECK(i.source == "openmpi");
                          CHILD_CHECK(i.rank == 3 && i.size == 4);
                          CHILD_CHECK(i.local_rank == 1 && i.local_size == 2);
                          CHILD_CHECK(i.root_host == "10.9.9.9" && i.root_port == 4000);
                          return 0;
                        }));
  // MASTER_ADDR/MASTER_PORT are used as they are (no +1: no TCPStore owns the port).
  EXPECT_EQ(0, in_child({{"OMPI_COMM_WORLD_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "host-a"},
                         {"MASTER_PORT", "5000"}},
                        [] {
                          LaunchInfo i = launch_info_from_env();
                          CHILD_CHECK(i.root_host == "host-a" && i.root_port == 5000);
                          return 0;
                        }));
  // Without any of them from_env() says what to set.
  EXPECT_EQ(0, in_child({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, [] {
              CHILD_CHECK(launch_info_from_env().root_host.empty());
              CHILD_CHECK(throws_invalid([] { Bootstrap::from_env(); },
                                         "set MASTER_ADDR (or "
                                         "GNIO_BOOTSTRAP_ADDR)"));
              ::setenv("MASTER_ADDR", "127.0.0.1", 1);
              CHILD_CHECK(throws_invalid([] { Bootstrap::from_env(); }, "GNIO_BOOTSTRAP_PORT"));
              return 0;
            }));
}

TEST(LaunchEnv, Slurm) {
  EXPECT_EQ(0, in_child({{"SLURM_PROCID", "5"},
                         {"SLURM_NTASKS", "8"},
                         {"SLURM_LOCALID", "1"},
                         {"SLURM_STEP_TASKS_PER_NODE", "3(x2),2"},
                         {"SLURM_NODEID", "2"},
                         {"SLURM_JOB_ID", "777"},
                         {"SLURM_STEP_ID", "0"},
                         {"MASTER_ADDR", "10.0.0.1"},
                         {"GNIO_BOOTSTRAP_PORT", "4100"}},
                        [] {
                          LaunchInfo i = launch_info_from_env();
                          CHILD_CHECK(i.source == "slurm");
                          CHILD_CHECK(i.rank == 5 && i.size == 8);
                          CHILD_CHECK(i.local_rank == 1 && i.local_size == 2);
                          CHILD_CHECK(i.root_host == "10.0.0.1" && i.root_port == 4100);
                          std::uint64_t t1 = bootstrap::job_token_from_env(i);
                          CHILD_CHECK(t1 == bootstrap::job_token_from_env(i));
                          ::setenv("SLURM_JOB_ID", "778", 1);
                          CHILD_CHECK(t1 != bootstrap::job_token_from_env(i));
                          return 0;
                        }));
  EXPECT_EQ(
      0,
      in_child({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_NTASKS_PER_NODE", "4"}}, [] {
        CHILD_CHECK(launch_info_from_env().local_size == 4);
        ::setenv("SLURM_STEP_TASKS_PER_NODE", "4(x2)", 1);  // uniform
        CHILD_CHECK(launch_info_from_env().local_size == 4);
        ::unsetenv("SLURM_NTASKS_PER_NODE");
        ::setenv("SLURM_STEP_TASKS_PER_NODE", "3,5", 1);  // no SLURM_NODEID
        CHILD_CHECK(launch_info_from_env().local_size == 0);
        return 0;
      }));
}

TEST(LaunchEnv, Pmi) {
  EXPECT_EQ(0, in_child({{"PMI_RANK", "1"},
                         {"PMI_SIZE", "2"},
                         {"MPI_LOCALRANKID", "1"},
                         {"MPI_LOCALNRANKS", "2"}},
                        [] {
                          LaunchInfo i = launch_info_from_env();
                          CHILD_CHECK(i.source == "pmi");
                          CHILD_CHECK(i.rank == 1 && i.size == 2);
                          CHILD_CHECK(i.local_rank == 1 && i.local_size == 2);
                          return 0;
                        }));
}

TEST(LaunchEnv, InconsistentValuesNameTheVariable) {
  struct Case {
    Env env;
    const char* words;
  };
  std::vector<Case> cases = {
      {{}, "no launcher environment"},
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK=4"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "4"}}, "RANK=-1"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "four"}}, "WORLD_SIZE='four'"},
      {{{"RANK", "0"}}, "WORLD_SIZE is not set"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "2"}},
       "LOCAL_RANK=3"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}}, "LOCAL_WORLD_SIZE=3"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT=70000"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "65535"}}, "MASTER_PORT=65535"},
      {{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, "OMPI_COMM_WORLD_RANK=3"},
      {{{"SLURM_PROCID", "0"}}, "SLURM_NTASKS is not set"},
      {{{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "8"}}, "SLURM_PROCID=9"},
      {{{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}, "PMI_RANK='x'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"GNIO_BOOTSTRAP_PORT", "99999"}},
       "GNIO_BOOTSTRAP_PORT=99999"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(0, in_child(c.env,
                          [&] {
                            CHILD_CHECK(throws_invalid([] { launch_info_from_env(); }, c.words));
                            return 0;
                          }))
        << "case: " << c.words;
  EXPECT_EQ(0, in_child({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"GNIO_JOB_TOKEN", "not-hex"}}, [] {
              CHILD_CHECK(throws_invalid(
                  [] { bootstrap::job_token_from_env(launch_info_from_env()); }, "GNIO_JOB_TOKEN"));
              return 0;
            }));
}

/// A TCP port that was free a moment ago, with the next one free too.
int free_port_pair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    bootstrap::Fd a(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(a.get(), reinterpret_cast<sockaddr*>(&in), sizeof(in)) != 0) continue;
    socklen_t len = sizeof(in);
    ::getsockname(a.get(), reinterpret_cast<sockaddr*>(&in), &len);
    int port = ntohs(in.sin_port);
    if (port >= 65535) continue;
    bootstrap::Fd b(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    in.sin_port = htons(static_cast<std::uint16_t>(port + 1));
    if (::bind(b.get(), reinterpret_cast<sockaddr*>(&in), sizeof(in)) == 0) return port;
  }
  return 0;
}

/// from_env end to end: every rank derives the same token and rank 0 hosts the root.
void from_env_job(const std::function<Env(int rank, const std::string& port)>& env_of, int n) {
  std::string port = std::to_string(free_port_pair());
  auto codes = run_ranks(iota_ranks(n), [&](int r) {
    Env env = env_of(r, port);
    set_env(env);
    ::setenv("GNIO_BOOTSTRAP_TIMEOUT", "10", 1);
    auto b = Bootstrap::from_env();
    CHILD_CHECK(b->rank() == r && b->size() == n);
    std::vector<std::uint64_t> tokens(n);
    tokens[r] = b->token();
    b->allgather(tokens.data(), sizeof(std::uint64_t));
    for (int i = 0; i < n; ++i) CHILD_CHECK(tokens[i] == b->token() && tokens[i] != 0);
    std::vector<int> slots(n);
    slots[r] = 1000 + r;
    b->allgather(slots.data(), sizeof(int));
    for (int i = 0; i < n; ++i) CHILD_CHECK(slots[i] == 1000 + i);
    return 0;
  });
  for (int i = 0; i < n; ++i) EXPECT_EQ(codes[i], 0) << "rank " << i;
}

TEST(FromEnv, TorchrunVariables) {
  std::string rank_text[4] = {"0", "1", "2", "3"};
  from_env_job(
      [&](int r, const std::string& port) -> Env {
        static std::string p;
        p = port;
        return {{"RANK", rank_text[r].c_str()},
                {"WORLD_SIZE", "4"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", p.c_str()},
                {"TORCHELASTIC_RUN_ID", "run-1"}};
      },
      4);
}

TEST(FromEnv, OpenMpiVariablesWithExplicitRoot) {
  std::string rank_text[3] = {"0", "1", "2"};
  from_env_job(
      [&](int r, const std::string& port) -> Env {
        static std::string p;
        p = port;
        return {{"OMPI_COMM_WORLD_RANK", rank_text[r].c_str()},
                {"OMPI_COMM_WORLD_SIZE", "3"},
                {"GNIO_BOOTSTRAP_ADDR", "127.0.0.1"},
                {"GNIO_BOOTSTRAP_PORT", p.c_str()},
                {"OMPI_MCA_orte_ess_jobid", "12345"}};
      },
      3);
}

}  // namespace
}  // namespace gnio::test
