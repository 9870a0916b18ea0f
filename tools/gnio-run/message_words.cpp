#include "message_words.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cstring>

#include "tool_output.hpp"

namespace gnio::run {

const char* signal_abbrev(int sig) {
  switch (sig) {
    case SIGINT: return "INT";
    case SIGTERM: return "TERM";
    case SIGHUP: return "HUP";
    case SIGQUIT: return "QUIT";
    case SIGKILL: return "KILL";
    default: return "?";
  }
}

const char* ranks_word(std::size_t n) {
  return n == 1 ? "rank" : "ranks";
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return strf("exited with code %d", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return strf("was killed by signal %d (%s)%s", sig, name ? name : "unknown",
                WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return strf("ended with wait status 0x%x", status);
}

std::string seconds_text(double s) {
  return strf("%g s", s);
}

}  // namespace gnio::run
