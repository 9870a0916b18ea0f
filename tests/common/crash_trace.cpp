// Linked into every test binary: a test process that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL)
// prints its stack to stderr before it dies, so a crash on a machine we reach once (the GPU
// machine) is diagnosable from the log. Frames read "binary(+0xOFFSET)"; resolve them with
// `addr2line -f -C -e binary 0xOFFSET`. Left out under ASan and TSan, which report crashes
// themselves.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
namespace {

void on_crash(int sig) {
  // Only async-signal-safe calls: write(2) and backtrace_symbols_fd (whose first use of the
  // unwinder was made at install time, below).
  const char* what = strsignal(sig);
  const char head[] = "\n*** test process crashed: ";
  (void)!::write(STDERR_FILENO, head, sizeof(head) - 1);
  (void)!::write(STDERR_FILENO, what, std::strlen(what));
  (void)!::write(STDERR_FILENO, "; stack:\n", 9);
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

bool install() {
  void* warm[1];
  (void)::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  struct sigaction sa {};
  sa.sa_handler = on_crash;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::sigaction(sig, &sa, nullptr);
  return true;
}

const bool installed = install();

}  // namespace
#endif
