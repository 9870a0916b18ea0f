#include "bootstrap/wire.hpp"

#include <algorithm>
#include <cstring>

namespace gnio::bootstrap {
namespace {

void put16(unsigned char* p, std::uint16_t v) {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
}
void put32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint16_t get16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
std::uint32_t get32(const unsigned char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}
std::uint64_t get64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
bool all_zero(const unsigned char* p, std::size_t n) {
  return std::all_of(p, p + n, [](unsigned char c) { return c == 0; });
}
bool printable(unsigned char c) {
  return c >= 0x20 && c < 0x7f;
}

// The bytes of a fixed-size message that begins with its `magic`; null when the length or the
// magic is not that message's.
const unsigned char* message_bytes(const void* data, std::size_t len, std::size_t message_len,
                                   std::uint32_t magic) {
  if (!data || len != message_len) return nullptr;
  const auto* p = static_cast<const unsigned char*>(data);
  return get32(p) == magic ? p : nullptr;
}

// A 16-bit field that must name one of the values first..last of `Enum`; nullopt for any other.
template <class Enum>
std::optional<Enum> enum_field(const unsigned char* p, Enum first, Enum last) {
  const std::uint16_t raw = get16(p);
  if (raw < static_cast<std::uint16_t>(first) || raw > static_cast<std::uint16_t>(last))
    return std::nullopt;
  return static_cast<Enum>(raw);
}

std::uint32_t fnv1a32(const unsigned char* p, std::size_t n) {
  std::uint32_t h = 0x811c9dc5u;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x01000193u;
  }
  return h;
}

// NetAddress as 24 bytes: u8 family | u8 0 | u16 port | u32 scope | 16 address bytes.
constexpr std::size_t kNetAddressBytes = 24;

void encode_net_address(const NetAddress& a, unsigned char* p) {
  std::memset(p, 0, kNetAddressBytes);
  p[0] = a.family;
  put16(p + 2, a.port);
  put32(p + 4, a.scope_id);
  std::memcpy(p + 8, a.bytes.data(), a.family == 4 ? 4 : 16);
}

std::optional<NetAddress> decode_net_address(const unsigned char* p) {
  NetAddress a;
  a.family = p[0];
  if ((a.family != 4 && a.family != 6) || p[1] != 0) return std::nullopt;
  a.port = get16(p + 2);
  a.scope_id = get32(p + 4);
  if (a.port == 0) return std::nullopt;
  if (a.family == 4 && (a.scope_id != 0 || !all_zero(p + 12, 12))) return std::nullopt;
  std::memcpy(a.bytes.data(), p + 8, 16);
  return a;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void encode_hello(const Hello& h, unsigned char out[kHelloBytes]) {
  put32(out, kHelloMagic);
  put16(out + 4, kProtocolVersion);
  put16(out + 6, static_cast<std::uint16_t>(h.purpose));
  put64(out + 8, h.token);
  put32(out + 16, static_cast<std::uint32_t>(h.rank));
  put32(out + 20, static_cast<std::uint32_t>(h.size));
}

std::optional<Hello> decode_hello(const void* data, std::size_t len) {
  const unsigned char* p = message_bytes(data, len, kHelloBytes, kHelloMagic);
  if (!p || get16(p + 4) != kProtocolVersion) return std::nullopt;
  const std::optional<Purpose> purpose = enum_field(p + 6, Purpose::Register, Purpose::Liveness);
  if (!purpose) return std::nullopt;
  const Hello h{.purpose = *purpose,
                .token = get64(p + 8),
                .rank = static_cast<std::int32_t>(get32(p + 16)),
                .size = static_cast<std::int32_t>(get32(p + 20))};
  if (h.size < 1 || h.size > kMaxRanks || h.rank < 0 || h.rank >= h.size) return std::nullopt;
  return h;
}

// ---------------------------------------------------------------------------------------------

void encode_frame_header(const FrameHeader& f, unsigned char out[kFrameHeaderBytes]) {
  put32(out, kFrameMagic);
  put16(out + 4, static_cast<std::uint16_t>(f.type));
  put16(out + 6, f.flags);
  put32(out + 8, static_cast<std::uint32_t>(f.src));
  put32(out + 12, static_cast<std::uint32_t>(f.tag));
  put64(out + 16, f.length);
}

std::optional<FrameHeader> decode_frame_header(const void* data, std::size_t len,
                                               std::uint64_t max_length) {
  const unsigned char* p = message_bytes(data, len, kFrameHeaderBytes, kFrameMagic);
  if (!p) return std::nullopt;
  const std::optional<FrameType> type = enum_field(p + 4, FrameType::Register, FrameType::Abort);
  if (!type) return std::nullopt;
  const FrameHeader f{.type = *type,
                      .flags = get16(p + 6),
                      .src = static_cast<std::int32_t>(get32(p + 8)),
                      .tag = static_cast<std::int32_t>(get32(p + 12)),
                      .length = get64(p + 16)};
  if (f.src < -1 || f.length > max_length) return std::nullopt;
  return f;
}

// ---------------------------------------------------------------------------------------------

bool operator==(const NetAddress& a, const NetAddress& b) {
  return a.family == b.family && a.port == b.port && a.scope_id == b.scope_id && a.bytes == b.bytes;
}

void encode_rank_record(const RankRecord& r, unsigned char out[kRankRecordBytes]) {
  std::memset(out, 0, kRankRecordBytes);
  encode_net_address(r.listen, out);
  put32(out + 24, r.pid);
  put32(out + 28, r.wait_ms);
  put32(out + 32, r.timeout_ms);
  std::size_t n = std::min(r.host.size(), kMaxHostName);
  for (std::size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(r.host[i]);
    out[40 + i] = printable(c) ? c : '?';
  }
}

std::optional<RankRecord> decode_rank_record(const void* data, std::size_t len) {
  if (!data || len != kRankRecordBytes) return std::nullopt;
  const auto* p = static_cast<const unsigned char*>(data);
  auto addr = decode_net_address(p);
  if (!addr) return std::nullopt;
  RankRecord r;
  r.listen = *addr;
  r.pid = get32(p + 24);
  r.wait_ms = get32(p + 28);
  r.timeout_ms = get32(p + 32);
  if (get32(p + 36) != 0) return std::nullopt;
  const unsigned char* host = p + 40;
  std::size_t n = 0;
  while (n < kMaxHostName && host[n] != 0) {
    if (!printable(host[n])) return std::nullopt;
    ++n;
  }
  if (!all_zero(host + n, kRankRecordBytes - 40 - n)) return std::nullopt;
  r.host.assign(reinterpret_cast<const char*>(host), n);
  return r;
}

std::vector<unsigned char> encode_table(const std::vector<RankRecord>& records) {
  std::vector<unsigned char> out(records.size() * kRankRecordBytes);
  for (std::size_t i = 0; i < records.size(); ++i)
    encode_rank_record(records[i], out.data() + i * kRankRecordBytes);
  return out;
}

std::optional<std::vector<RankRecord>> decode_table(const void* data, std::size_t len,
                                                    std::int32_t count) {
  if (!data || count < 1 || count > kMaxRanks ||
      len != static_cast<std::size_t>(count) * kRankRecordBytes)
    return std::nullopt;
  const auto* p = static_cast<const unsigned char*>(data);
  std::vector<RankRecord> records;
  records.reserve(static_cast<std::size_t>(count));
  for (std::int32_t i = 0; i < count; ++i) {
    auto r =
        decode_rank_record(p + static_cast<std::size_t>(i) * kRankRecordBytes, kRankRecordBytes);
    if (!r) return std::nullopt;
    records.push_back(std::move(*r));
  }
  return records;
}

// ---------------------------------------------------------------------------------------------

std::vector<unsigned char> encode_error_payload(const ErrorPayload& e) {
  std::size_t n = std::min(e.message.size(), kMaxErrorText);
  std::vector<unsigned char> out(4 + n);
  put32(out.data(), e.error_class);
  std::memcpy(out.data() + 4, e.message.data(), n);
  return out;
}

std::optional<ErrorPayload> decode_error_payload(const void* data, std::size_t len,
                                                 std::uint32_t class_count) {
  if (!data || len < 4 || len > kMaxErrorPayload) return std::nullopt;
  const auto* p = static_cast<const unsigned char*>(data);
  ErrorPayload e;
  e.error_class = get32(p);
  if (e.error_class >= class_count) return std::nullopt;
  e.message.reserve(len - 4);
  for (std::size_t i = 4; i < len; ++i) e.message.push_back(printable(p[i]) ? p[i] : '?');
  return e;
}

// ---------------------------------------------------------------------------------------------

void encode_unique_id(const UniqueIdFields& f, unsigned char out[kUniqueIdBytes]) {
  std::memset(out, 0, kUniqueIdBytes);
  put32(out, kUniqueIdMagic);
  put16(out + 4, kProtocolVersion);
  out[6] = f.root.family;
  put16(out + 8, f.root.port);
  put32(out + 12, f.root.scope_id);
  std::memcpy(out + 16, f.root.bytes.data(), f.root.family == 4 ? 4 : 16);
  put64(out + 32, f.token);
  put32(out + 40, fnv1a32(out, 40));
}

std::optional<UniqueIdFields> decode_unique_id(const void* data, std::size_t len) {
  const unsigned char* p = message_bytes(data, len, kUniqueIdBytes, kUniqueIdMagic);
  if (!p || get16(p + 4) != kProtocolVersion) return std::nullopt;
  if (get32(p + 40) != fnv1a32(p, 40) || !all_zero(p + 44, kUniqueIdBytes - 44))
    return std::nullopt;
  if (p[7] != 0 || get16(p + 10) != 0) return std::nullopt;
  UniqueIdFields f;
  f.root.family = p[6];
  f.root.port = get16(p + 8);
  f.root.scope_id = get32(p + 12);
  if (f.root.family != 4 && f.root.family != 6) return std::nullopt;
  if (f.root.port == 0) return std::nullopt;
  if (f.root.family == 4 && (f.root.scope_id != 0 || !all_zero(p + 20, 12))) return std::nullopt;
  std::memcpy(f.root.bytes.data(), p + 16, 16);
  f.token = get64(p + 32);
  return f;
}

std::string hex_encode(const void* data, std::size_t len) {
  static const char kDigits[] = "0123456789abcdef";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out(2 * len, '0');
  for (std::size_t i = 0; i < len; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

std::optional<std::vector<unsigned char>> hex_decode(std::string_view text) {
  if (text.size() % 2) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<unsigned char> out(text.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return out;
}

std::uint64_t fnv1a64(std::string_view text, std::uint64_t seed) {
  std::uint64_t h = seed;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// ---------------------------------------------------------------------------------------------

void encode_fd_message(const FdMessage& m, unsigned char out[kFdMessageBytes]) {
  put32(out, kFdMessageMagic);
  put32(out + 4, m.seq);
  put32(out + 8, static_cast<std::uint32_t>(m.src));
  put32(out + 12, 0);
}

std::optional<FdMessage> decode_fd_message(const void* data, std::size_t len) {
  if (!data || len != kFdMessageBytes) return std::nullopt;
  const auto* p = static_cast<const unsigned char*>(data);
  if (get32(p) != kFdMessageMagic || get32(p + 12) != 0) return std::nullopt;
  FdMessage m;
  m.seq = get32(p + 4);
  m.src = static_cast<std::int32_t>(get32(p + 8));
  if (m.src < 0 || m.src >= kMaxRanks) return std::nullopt;
  return m;
}

// ---------------------------------------------------------------------------------------------

std::span<unsigned char> StreamParser::next_buffer() {
  switch (state_) {
    case State::Hello: return {head_ + have_, kHelloBytes - have_};
    case State::Header: return {head_ + have_, kFrameHeaderBytes - have_};
    case State::Payload: return {payload_.data() + have_, payload_.size() - have_};
    case State::Failed: return {};
  }
  return {};
}

StreamParser::Event StreamParser::fail(const char* why) {
  state_ = State::Failed;
  error_ = why;
  payload_.clear();
  return Event::Error;
}

StreamParser::Event StreamParser::commit(std::size_t n) {
  if (state_ == State::Failed) return Event::Error;
  if (n > next_buffer().size()) return fail("parser misuse: committed more bytes than requested");
  have_ += n;
  bytes_seen_ += n;
  switch (state_) {
    case State::Hello: {
      // Check the magic as soon as it is complete, so garbage is refused without waiting for
      // the rest of a hello that may never come.
      if (have_ >= 4 && std::memcmp(head_, "GNhi", 4) != 0)
        return fail("not a gnio hello (bad magic)");
      if (have_ < kHelloBytes) return Event::NeedMore;
      auto h = decode_hello(head_, kHelloBytes);
      if (!h) return fail("malformed hello (version, purpose, rank or size out of range)");
      hello_ = *h;
      have_ = 0;
      state_ = State::Header;
      return Event::Hello;
    }
    case State::Header: {
      if (have_ >= 4 && std::memcmp(head_, "GNfr", 4) != 0)
        return fail("not a gnio frame (bad magic)");
      if (have_ < kFrameHeaderBytes) return Event::NeedMore;
      auto f = decode_frame_header(head_, kFrameHeaderBytes, max_length_);
      if (!f) {
        if (get64(head_ + 16) > max_length_) return fail("frame longer than the receiver's limit");
        return fail("malformed frame header (type or source out of range)");
      }
      header_ = *f;
      have_ = 0;
      payload_.clear();
      if (header_.length == 0) return Event::Frame;
      payload_.resize(static_cast<std::size_t>(header_.length));
      state_ = State::Payload;
      return Event::NeedMore;
    }
    case State::Payload:
      if (have_ < payload_.size()) return Event::NeedMore;
      have_ = 0;
      state_ = State::Header;
      return Event::Frame;
    case State::Failed: return Event::Error;
  }
  return Event::Error;
}

}  // namespace gnio::bootstrap
