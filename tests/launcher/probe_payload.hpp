// The deterministic line contents gnio_launcher_probe prints with --lines, shared with the test
// that checks them, so every byte of every line can be verified after it went through gnio-run.
#pragma once

#include <string>

namespace gnio::launcher_test {

/// Payload of line `index` of `rank` on stream `stream` ('o' for stdout, 'e' for stderr). Lengths
/// vary from 0 to 150 bytes, and every 50th line is 6000 bytes (longer than PIPE_BUF, so it
/// reaches gnio-run in several reads).
inline std::string probe_payload(int rank, char stream, int index) {
  std::size_t length =
      index % 50 == 49 ? 6000 : static_cast<std::size_t>(index * 37 + rank * 11) % 151;
  std::string s(length, 'a');
  for (std::size_t k = 0; k < length; ++k)
    s[k] = static_cast<char>('a' + (rank * 7 + index + static_cast<int>(k) + stream) % 26);
  return s;
}

/// The full text of that line, without its newline: "out <rank> <index> <payload>".
inline std::string probe_line(int rank, char stream, int index) {
  return std::string(stream == 'o' ? "out " : "err ") + std::to_string(rank) + " " +
         std::to_string(index) + " " + probe_payload(rank, stream, index);
}

}  // namespace gnio::launcher_test
