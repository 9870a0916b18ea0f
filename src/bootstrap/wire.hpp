// The bootstrap wire protocol: byte layouts, encoders, and decoders that never trust their input.
//
// Everything here is a pure function of its arguments (no sockets, no globals, no exceptions, no
// gnio base layer), so the libFuzzer target tests/bootstrap/fuzz_wire.cpp can compile this file
// on its own and feed it arbitrary bytes. All integers are little-endian on the wire.
//
// A connection carries, in order:
//
//   Hello (24 bytes, sent once by the side that connected)
//     u32 magic "GNhi" | u16 version | u16 purpose | u64 job token | i32 rank | i32 size
//   Frames, each a FrameHeader (24 bytes) followed by `length` payload bytes
//     u32 magic "GNfr" | u16 type | u16 flags | i32 src rank | i32 tag | u64 length
//
// Decoders accept exactly one canonical encoding (reserved bytes must be zero), so for every
// input that decodes, encode(decode(x)) == x; the fuzz target checks that property.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gnio::bootstrap {

/// Four ASCII characters read as a little-endian u32 (how magics appear in a hex dump).
constexpr std::uint32_t fourcc(const char (&s)[5]) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[0])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[1])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[2])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[3])) << 24;
}

inline constexpr std::uint32_t kHelloMagic = fourcc("GNhi");
inline constexpr std::uint32_t kFrameMagic = fourcc("GNfr");
inline constexpr std::uint32_t kUniqueIdMagic = fourcc("GNid");
inline constexpr std::uint32_t kFdMessageMagic = fourcc("GNfd");
inline constexpr std::uint32_t kLivenessMagic = fourcc("GNlv");
/// Bumped on any incompatible change of a layout below; peers with another version are refused.
inline constexpr std::uint16_t kProtocolVersion = 1;
/// Largest job the bootstrap accepts (bounds the root's address table).
inline constexpr std::int32_t kMaxRanks = 1 << 18;
/// Largest text carried by an Error or Abort frame.
inline constexpr std::size_t kMaxErrorText = 4096;

// ---------------------------------------------------------------------------------------------
// Hello

/// Why a connection was opened; a listener refuses purposes it does not serve.
enum class Purpose : std::uint16_t {
  Register = 1,    ///< a rank registering with the root service
  Peer = 2,        ///< a rank opening its one-way data connection to another rank
  FdExchange = 3,  ///< node-local Unix socket of FdExchange
  Liveness = 4,    ///< a rank's heartbeat connection to rank 0 (LivenessWatcher)
};

/// The first bytes on every connection.
struct Hello {
  Purpose purpose = Purpose::Peer;
  std::uint64_t token = 0;  ///< the job token; a listener drops connections with another one
  std::int32_t rank = 0;    ///< the connecting rank
  std::int32_t size = 0;    ///< the job size the connecting rank believes in
};
inline constexpr std::size_t kHelloBytes = 24;

/// Writes `hello` (with kHelloMagic and kProtocolVersion) into `out`.
void encode_hello(const Hello& hello, unsigned char out[kHelloBytes]);
/// Decodes a hello: needs exactly kHelloBytes, the magic, kProtocolVersion, a known purpose and
/// 0 <= rank < size <= kMaxRanks. The token is the caller's to compare.
std::optional<Hello> decode_hello(const void* data, std::size_t len);

// ---------------------------------------------------------------------------------------------
// Frames

/// What a frame carries.
enum class FrameType : std::uint16_t {
  Register = 1,  ///< rank -> root: a RankRecord
  Table = 2,     ///< root -> rank: size() RankRecords, indexed by rank
  Error = 3,     ///< root -> rank: ErrorPayload; the rendezvous failed for this rank
  Data = 4,      ///< rank -> rank: user send/recv payload, matched by tag
  Coll = 5,      ///< rank -> rank: collective step; tag = collective sequence number, flags = kind
  Abort = 6,     ///< rank -> rank: ErrorPayload; the sender gave up on the job
};

/// Collective kinds carried in a Coll frame's flags (to diagnose ranks calling different ones).
enum class CollKind : std::uint16_t { Allgather = 1, Broadcast = 2, Barrier = 3 };

/// The fixed header in front of every frame's payload.
struct FrameHeader {
  FrameType type = FrameType::Data;
  std::uint16_t flags = 0;
  std::int32_t src = 0;  ///< sending rank (-1 for the root service)
  std::int32_t tag = 0;
  std::uint64_t length = 0;  ///< payload bytes that follow
};
inline constexpr std::size_t kFrameHeaderBytes = 24;

/// Writes `header` (with kFrameMagic) into `out`.
void encode_frame_header(const FrameHeader& header, unsigned char out[kFrameHeaderBytes]);
/// Decodes a header: needs exactly kFrameHeaderBytes, the magic, a known type, src >= -1, and
/// length <= max_length (the receiver's bound: GNIO_BOOTSTRAP_MAX_MSG or a per-type limit).
std::optional<FrameHeader> decode_frame_header(const void* data, std::size_t len,
                                               std::uint64_t max_length);

// ---------------------------------------------------------------------------------------------
// Addresses and rank records

/// An IPv4 or IPv6 endpoint as carried on the wire (the socket layer converts it to sockaddr).
struct NetAddress {
  std::uint8_t family = 4;  ///< 4 or 6
  std::uint16_t port = 0;   ///< host order; never 0 on the wire
  std::uint32_t scope_id = 0;
  std::array<std::uint8_t, 16> bytes{};  ///< IPv4 uses the first 4; the rest are 0
};

/// Field-wise equality.
bool operator==(const NetAddress& a, const NetAddress& b);

/// What a rank tells the root, and what the root's table holds for every rank.
///
/// Layout (96 bytes): NetAddress (u8 family | u8 0 | u16 port | u32 scope | 16 address bytes) |
/// u32 pid | u32 wait_ms | u32 timeout_ms | u32 0 | 56 bytes host name, NUL padded.
struct RankRecord {
  NetAddress listen;             ///< the rank's listener for peer connections
  std::uint32_t pid = 0;         ///< for error messages
  std::uint32_t wait_ms = 0;     ///< time the rank will still wait for the table; 0 = forever
  std::uint32_t timeout_ms = 0;  ///< the rank's GNIO_BOOTSTRAP_TIMEOUT, for messages
  std::string host;              ///< host name, for messages (printable ASCII)
};
inline constexpr std::size_t kRankRecordBytes = 96;
inline constexpr std::size_t kMaxHostName = 55;

/// Encodes a record; a host name longer than kMaxHostName or with unprintable bytes is cut or
/// replaced so the result always decodes.
void encode_rank_record(const RankRecord& record, unsigned char out[kRankRecordBytes]);
/// Decodes a record: exactly kRankRecordBytes, a valid address (family 4 or 6, port != 0,
/// unused bytes zero), a printable NUL-padded host name.
std::optional<RankRecord> decode_rank_record(const void* data, std::size_t len);

/// The root's reply: `count` records back to back.
std::vector<unsigned char> encode_table(const std::vector<RankRecord>& records);
/// Decodes exactly `count` records (1 <= count <= kMaxRanks), each as decode_rank_record().
std::optional<std::vector<RankRecord>> decode_table(const void* data, std::size_t len,
                                                    std::int32_t count);

// ---------------------------------------------------------------------------------------------
// Error / Abort payloads

/// A failure report: gnio::ErrorClass as an integer and a message.
struct ErrorPayload {
  std::uint32_t error_class = 0;
  std::string message;
};
/// The largest valid error payload.
inline constexpr std::size_t kMaxErrorPayload = 4 + kMaxErrorText;

/// Encodes; a message longer than kMaxErrorText is cut.
std::vector<unsigned char> encode_error_payload(const ErrorPayload& payload);
/// Decodes: 4 <= len <= kMaxErrorPayload, a class below `class_count`; unprintable bytes of the
/// message become '?', so it is safe to print.
std::optional<ErrorPayload> decode_error_payload(const void* data, std::size_t len,
                                                 std::uint32_t class_count);

// ---------------------------------------------------------------------------------------------
// Unique id (128 bytes) and its hex text

/// The contents of a gnio::UniqueId.
struct UniqueIdFields {
  NetAddress root;
  std::uint64_t token = 0;
};
inline constexpr std::size_t kUniqueIdBytes = 128;

/// Layout: u32 magic "GNid" | u16 version | u8 family | u8 0 | u16 port | u16 0 | u32 scope |
/// 16 address bytes | u64 token | u32 FNV-1a checksum of the 40 bytes before it | 84 zero bytes.
void encode_unique_id(const UniqueIdFields& fields, unsigned char out[kUniqueIdBytes]);
/// Decodes: exactly kUniqueIdBytes, magic, version, checksum, a valid address, zero padding.
std::optional<UniqueIdFields> decode_unique_id(const void* data, std::size_t len);

/// Lower-case hex of `len` bytes.
std::string hex_encode(const void* data, std::size_t len);
/// Hex (either case, no separators) to bytes; nullopt on odd length or a non-hex character.
std::optional<std::vector<unsigned char>> hex_decode(std::string_view text);

/// 64-bit FNV-1a, for deriving job tokens from launcher ids (not cryptographic).
std::uint64_t fnv1a64(std::string_view text, std::uint64_t seed = 0xcbf29ce484222325ull);

// ---------------------------------------------------------------------------------------------
// FdExchange message (travels with one SCM_RIGHTS descriptor)

/// One descriptor handed to a node peer in allgather_fd call number `seq`.
struct FdMessage {
  std::uint32_t seq = 0;
  std::int32_t src = 0;  ///< world rank of the sender
};
inline constexpr std::size_t kFdMessageBytes = 16;

/// Layout: u32 magic "GNfd" | u32 seq | i32 src | u32 0.
void encode_fd_message(const FdMessage& message, unsigned char out[kFdMessageBytes]);
/// Decodes: exactly kFdMessageBytes, the magic, zero reserved bytes, 0 <= src < kMaxRanks.
std::optional<FdMessage> decode_fd_message(const void* data, std::size_t len);

// ---------------------------------------------------------------------------------------------
// Incremental stream parsing

/// Splits one connection's byte stream into an optional hello and then frames. The owner reads
/// from its socket straight into next_buffer() and calls commit() with the count; the parser
/// never allocates more than one validated payload. Used by the root service, by every rank's
/// listener, and by the fuzz target.
class StreamParser {
 public:
  /// What commit() completed.
  enum class Event {
    NeedMore,  ///< nothing complete yet
    Hello,     ///< hello() is valid
    Frame,     ///< header() and take_payload() hold one frame
    Error,     ///< the stream is malformed; error() says why; the connection must be dropped
  };

  /// `expect_hello`: the stream starts with a Hello. `max_length`: the largest payload accepted.
  StreamParser(bool expect_hello, std::uint64_t max_length)
      : state_(expect_hello ? State::Hello : State::Header), max_length_(max_length) {}

  /// The bytes the parser wants next; fill any prefix of them.
  std::span<unsigned char> next_buffer();
  /// Accounts `n` bytes written into next_buffer() (n <= its size).
  Event commit(std::size_t n);

  /// Changes the payload bound (for example once the hello told the job size).
  void set_max_length(std::uint64_t max_length) { max_length_ = max_length; }

  /// The hello, valid after Event::Hello.
  const Hello& hello() const { return hello_; }
  /// The last frame's header, valid after Event::Frame.
  const FrameHeader& header() const { return header_; }
  /// Moves the completed frame's payload out.
  std::vector<unsigned char> take_payload() { return std::move(payload_); }
  /// Why the stream was refused (static text).
  const char* error() const { return error_; }
  /// True when bytes of an incomplete hello or frame have been received.
  bool mid_message() const { return have_ > 0 || state_ == State::Payload; }
  /// Bytes received so far, in total (for diagnostics).
  std::uint64_t bytes_seen() const { return bytes_seen_; }

 private:
  enum class State { Hello, Header, Payload, Failed };
  Event fail(const char* why);

  State state_;
  std::uint64_t max_length_;
  unsigned char head_[kHelloBytes > kFrameHeaderBytes ? kHelloBytes : kFrameHeaderBytes] = {};
  std::size_t have_ = 0;  // bytes of head_ or payload_ filled
  Hello hello_;
  FrameHeader header_;
  std::vector<unsigned char> payload_;
  const char* error_ = "";
  std::uint64_t bytes_seen_ = 0;
};

}  // namespace gnio::bootstrap
