#include "output_stream.hpp"

#include <unistd.h>

#include <cerrno>

#include "tool_output.hpp"

namespace gnio::run {
namespace {

/// A line without a newline longer than this is emitted as a line of its own, so a rank that
/// prints an endless progress bar cannot grow gnio-run's memory without bound.
constexpr std::size_t kMaxLine = 64 * 1024;
/// Bytes read from one pipe per poll round: large enough for throughput, small enough to be fair
/// between ranks.
constexpr std::size_t kReadChunk = 64 * 1024;

}  // namespace

void OutputStream::consume(const char* data, std::size_t n) {
  pending.append(data, n);
  std::string out;
  std::size_t start = 0;
  for (;;) {
    std::size_t nl = pending.find('\n', start);
    if (nl == std::string::npos) {
      if (pending.size() - start < kMaxLine) break;
      nl = start + kMaxLine;  // overlong line: cut it, so memory stays bounded
      out += prefix;
      out.append(pending, start, nl - start);
      out += '\n';
      start = nl;
      continue;
    }
    out += prefix;
    out.append(pending, start, nl + 1 - start);
    start = nl + 1;
  }
  pending.erase(0, start);
  if (!out.empty()) write_all(target, out);
}

void OutputStream::flush_partial() {
  if (pending.empty()) return;
  write_all(target, prefix + pending + "\n");
  pending.clear();
}

bool OutputStream::read_some() {
  char buf[kReadChunk];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  if (n > 0) {
    consume(buf, static_cast<std::size_t>(n));
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return true;
  close_and_flush();
  return false;
}

void OutputStream::drain_available() {
  while (fd >= 0) {
    char buf[kReadChunk];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      consume(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      close_and_flush();
    }
  }
}

void OutputStream::close_and_flush() {
  if (fd >= 0) ::close(fd);
  fd = -1;
  flush_partial();
}

}  // namespace gnio::run
