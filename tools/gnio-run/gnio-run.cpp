// gnio-run: starts N ranks of a program on this machine with torchrun-style environment variables,
// prefixes their output line by line, forwards signals to them, and stops the whole job as soon
// as one rank fails (or a --timeout passes), exiting with the first failure's status.
//
// It is deliberately small: the C++ standard library, POSIX/Linux calls, CLI11 (header-only) for
// the command line, and gnio's base layer (compiled in, see CMakeLists.txt) for the configuration
// table (GNIO_RUN_PREFIX, GNIO_JOB_TOKEN, GNIO_NODE_ID) and logging. It never touches a GPU. One
// thread, one poll() loop over the ranks' pipes and a signalfd, so huge outputs cannot deadlock
// and every wait is bounded by a deadline.
//
// The command line is in command_line.cpp, the ranks' environment in job_environment.cpp, the
// prefixing of their output in output_stream.cpp, and the job itself (spawning in
// rank_spawn.cpp, supervision in launcher.cpp) in Launcher.
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "command_line.hpp"
#include "exit_status.hpp"
#include "gnio/error.hpp"
#include "gnio/version.hpp"
#include "launcher.hpp"
#include "tool_output.hpp"

int main(int argc, char** argv) {
  using namespace gnio::run;
  // A closed stdin/stdout/stderr would be reused by the first pipe or signalfd and confuse the
  // ranks' descriptors: park /dev/null on them first.
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) == -1) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  Options opt;
  try {
    switch (parse_args(argc, argv, &opt)) {
      case Action::Help: print_help(); return 0;
      case Action::Version:
        write_all(STDOUT_FILENO, "gnio-run (gnio) " GNIO_VERSION_STRING "\n");
        return 0;
      case Action::Run: break;
    }
  } catch (const UsageError& e) {
    say("%s", e.message.c_str());
    write_all(STDERR_FILENO, std::string(kUsage) + "Run 'gnio-run --help' for details.\n");
    return kExitUsage;
  }
  try {
    Launcher launcher(opt);
    return launcher.run();
  } catch (const gnio::Error& e) {
    say("%s", e.what());
    return kExitInternal;
  }
}
