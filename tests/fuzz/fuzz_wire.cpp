// libFuzzer target for the bootstrap wire decoders (built with -DGNIO_FUZZ=ON and clang).
//
// Every decoder gets the raw input; whatever decodes must re-encode to the same bytes (decoders
// accept only canonical encodings). The stream parser gets the input in chunks whose sizes come
// from the input itself, as a listener would read it from a socket, and must never hand out more
// than one bounded payload or accept bytes after refusing the stream.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "bootstrap/wire.hpp"

using namespace gnio::bootstrap;

namespace {

void require(bool cond) {
  if (!cond) std::abort();
}

/// A decoded fixed-size record must encode back to exactly the N bytes it was decoded from
/// (decoders accept only canonical encodings).
template <std::size_t N, class Value, class Encode>
void require_reencodes(const Value& value, Encode encode, const std::uint8_t* data) {
  unsigned char again[N];
  encode(value, again);
  require(std::memcmp(again, data, N) == 0);
}

void decoders(const std::uint8_t* data, std::size_t size) {
  if (auto h = decode_hello(data, size)) require_reencodes<kHelloBytes>(*h, encode_hello, data);
  if (auto f = decode_frame_header(data, size, 1u << 20)) {
    require(f->length <= (1u << 20));
    require_reencodes<kFrameHeaderBytes>(*f, encode_frame_header, data);
  }
  if (auto r = decode_rank_record(data, size))
    require_reencodes<kRankRecordBytes>(*r, encode_rank_record, data);
  if (size > 0) {
    std::int32_t count = data[0] % 4 + 1;
    if (auto t = decode_table(data + 1, size - 1, count)) {
      require(static_cast<std::int32_t>(t->size()) == count);
      std::vector<unsigned char> again = encode_table(*t);
      require(again.size() == size - 1 && std::memcmp(again.data(), data + 1, size - 1) == 0);
    }
  }
  if (auto e = decode_error_payload(data, size, 6)) {
    require(e->error_class < 6 && e->message.size() == size - 4);
    for (char c : e->message) require(c >= 0x20 && c < 0x7f);
  }
  if (auto u = decode_unique_id(data, size))
    require_reencodes<kUniqueIdBytes>(*u, encode_unique_id, data);
  if (auto m = decode_fd_message(data, size))
    require_reencodes<kFdMessageBytes>(*m, encode_fd_message, data);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto bytes = hex_decode(text)) {
    require(bytes->size() * 2 == size);
    auto back = hex_decode(hex_encode(bytes->data(), bytes->size()));
    require(back && *back == *bytes);
  }
}

void stream(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  const bool expect_hello = data[0] & 1;
  const std::uint64_t max_length = static_cast<std::uint64_t>(data[1]) * 16;
  std::size_t chunk_seed = data[0] >> 1;
  data += 2;
  size -= 2;
  StreamParser p(expect_hello, max_length);
  std::size_t pos = 0;
  bool failed = false;
  int hellos = 0;
  while (pos < size) {
    auto buf = p.next_buffer();
    if (failed) {
      require(buf.empty());
      require(p.commit(0) == StreamParser::Event::Error);
      break;
    }
    require(!buf.empty());
    std::size_t n = std::min<std::size_t>({buf.size(), size - pos, chunk_seed % 37 + 1});
    chunk_seed = chunk_seed * 1103515245u + 12345u;
    std::memcpy(buf.data(), data + pos, n);
    pos += n;
    switch (p.commit(n)) {
      case StreamParser::Event::NeedMore: break;
      case StreamParser::Event::Hello: require(expect_hello && ++hellos == 1); break;
      case StreamParser::Event::Frame: {
        require(!expect_hello || hellos == 1);
        require(p.header().length <= max_length);
        std::vector<unsigned char> payload = p.take_payload();
        require(payload.size() == p.header().length);
        break;
      }
      case StreamParser::Event::Error:
        require(p.error() && *p.error());
        failed = true;
        break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  decoders(data, size);
  stream(data, size);
  return 0;
}
