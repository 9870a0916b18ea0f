// One of a rank's output pipes and the partial line read from it: line-by-line prefixing ("[r] ")
// in bounded memory. Separate from the launcher, which only decides when a pipe is read.
#pragma once

#include <cstddef>
#include <string>

namespace gnio::run {

/// One of a rank's output pipes (stdout or stderr) and the partial line read from it so far.
struct OutputStream {
  int fd = -1;          ///< read end of the pipe; -1 once closed (EOF) or when not captured
  int target = -1;      ///< where complete lines go: STDOUT_FILENO or STDERR_FILENO
  std::string prefix;   ///< "[r] "
  std::string pending;  ///< bytes after the last newline

  /// Appends `data` and writes every complete line, each prefixed, in one write.
  void consume(const char* data, std::size_t n);

  /// Writes the last partial line (with a newline added) once the pipe is finished.
  void flush_partial();

  /// Reads once. Returns false at EOF or on an error (the stream is then closed and flushed).
  bool read_some();

  /// Reads everything available now without blocking (the pipe is non-blocking).
  void drain_available();

  /// Closes the pipe and writes the partial line.
  void close_and_flush();
};

}  // namespace gnio::run
