// Reading and writing Ethernet, IPv4, ICMP and UDP headers in place, from kernels or host code:
// what the packet-I/O samples build their replies with. Every field is read and written byte by
// byte (network order, no alignment assumed), and every parse checks the frame is long enough
// for what it reads, so a truncated or malformed frame is rejected, never read past its end.
#pragma once

#include <cstdint>

#include "gnio/device/macros.hpp"

namespace gnio::packet {

inline constexpr unsigned kEthernetBytes = 14;
inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint8_t kProtocolIcmp = 1;
inline constexpr std::uint8_t kProtocolUdp = 17;
inline constexpr std::uint8_t kIcmpEchoReply = 0;
inline constexpr std::uint8_t kIcmpEchoRequest = 8;

GNIO_HD_INLINE std::uint16_t load16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
GNIO_HD_INLINE void store16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}

/// The Internet checksum (RFC 1071) of `n` bytes: the value to store in a zeroed checksum field.
GNIO_HD_INLINE std::uint16_t internet_checksum(const std::uint8_t* p, unsigned n) {
  std::uint32_t sum = 0;
  for (unsigned i = 0; i + 1 < n; i += 2) sum += load16(p + i);
  if (n & 1) sum += static_cast<std::uint32_t>(p[n - 1]) << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

/// Where an IPv4 packet's parts are in a frame; valid only when ok.
struct Ipv4View {
  bool ok = false;
  std::uint8_t* ip = nullptr;  ///< the IPv4 header
  unsigned header_bytes = 0;   ///< IHL * 4
  unsigned total_bytes = 0;    ///< the IP total length (header + payload)
  std::uint8_t protocol = 0;
  std::uint8_t* payload = nullptr;  ///< ip + header_bytes
  unsigned payload_bytes = 0;
};

/// Parses an Ethernet frame carrying IPv4: the EtherType, version, header length, total length
/// (within the frame) and header checksum must hold; anything else gives ok = false.
GNIO_HD_INLINE Ipv4View parse_ipv4(std::uint8_t* frame, unsigned length) {
  Ipv4View v;
  if (length < kEthernetBytes + 20 || load16(frame + 12) != kEtherTypeIpv4) return v;
  std::uint8_t* ip = frame + kEthernetBytes;
  const unsigned ihl = (ip[0] & 0x0f) * 4u, total = load16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl || kEthernetBytes + total > length) return v;
  if (internet_checksum(ip, ihl) != 0) return v;  // a correct header sums to zero
  v.ok = true;
  v.ip = ip;
  v.header_bytes = ihl;
  v.total_bytes = total;
  v.protocol = ip[9];
  v.payload = ip + ihl;
  v.payload_bytes = total - ihl;
  return v;
}

GNIO_HD_INLINE std::uint32_t load32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(load16(p)) << 16 | load16(p + 2);
}

/// Where a UDP datagram's parts are in a frame; valid only when ok.
struct UdpView {
  bool ok = false;
  std::uint32_t src_ip = 0, dst_ip = 0;  ///< host order
  std::uint16_t src_port = 0, dst_port = 0;
  std::uint8_t* payload = nullptr;
  unsigned payload_bytes = 0;
};

/// Parses an Ethernet frame carrying UDP over IPv4 (the IPv4 checks of parse_ipv4, then a UDP
/// header whose length fits the IP packet); the UDP checksum is not checked (IPv4 makes it
/// optional).
GNIO_HD_INLINE UdpView parse_udp(std::uint8_t* frame, unsigned length) {
  UdpView u;
  const Ipv4View v = parse_ipv4(frame, length);
  if (!v.ok || v.protocol != kProtocolUdp || v.payload_bytes < 8) return u;
  const unsigned udp_length = load16(v.payload + 4);
  if (udp_length < 8 || udp_length > v.payload_bytes) return u;
  u.ok = true;
  u.src_ip = load32(v.ip + 12);
  u.dst_ip = load32(v.ip + 16);
  u.src_port = load16(v.payload);
  u.dst_port = load16(v.payload + 2);
  u.payload = v.payload + 8;
  u.payload_bytes = udp_length - 8;
  return u;
}

/// Writes the Ethernet, IPv4 and UDP headers of a datagram of `payload_bytes` (which the caller
/// writes at frame + 42) from `src_mac`/`src_ip`:`src_port` to `dst_mac`/`dst_ip`:`dst_port`
/// (addresses in host order), TTL 64, the IP checksum computed, no UDP checksum. Returns the
/// frame's length (42 + payload_bytes).
GNIO_HD_INLINE unsigned write_udp_headers(std::uint8_t* frame, const std::uint8_t* dst_mac,
                                          const std::uint8_t* src_mac, std::uint32_t src_ip,
                                          std::uint32_t dst_ip, std::uint16_t src_port,
                                          std::uint16_t dst_port, unsigned payload_bytes) {
  for (unsigned i = 0; i < 6; ++i) {
    frame[i] = dst_mac[i];
    frame[6 + i] = src_mac[i];
  }
  store16(frame + 12, kEtherTypeIpv4);
  std::uint8_t* ip = frame + kEthernetBytes;
  ip[0] = 0x45;
  ip[1] = 0;
  store16(ip + 2, static_cast<std::uint16_t>(28 + payload_bytes));
  store16(ip + 4, 0);
  store16(ip + 6, 0);
  ip[8] = 64;
  ip[9] = kProtocolUdp;
  store16(ip + 10, 0);
  store16(ip + 12, static_cast<std::uint16_t>(src_ip >> 16));
  store16(ip + 14, static_cast<std::uint16_t>(src_ip));
  store16(ip + 16, static_cast<std::uint16_t>(dst_ip >> 16));
  store16(ip + 18, static_cast<std::uint16_t>(dst_ip));
  store16(ip + 10, internet_checksum(ip, 20));
  std::uint8_t* udp = ip + 20;
  store16(udp, src_port);
  store16(udp + 2, dst_port);
  store16(udp + 4, static_cast<std::uint16_t>(8 + payload_bytes));
  store16(udp + 6, 0);
  return kEthernetBytes + 28 + payload_bytes;
}

/// Writes into `reply` the UDP datagram that answers the one in `request` (parsed as `u`) with
/// the same payload: Ethernet and IP addresses and the ports swapped, TTL 64, the IP checksum
/// computed, the UDP checksum 0 (none, as IPv4 allows). Returns the reply's length.
GNIO_HD_INLINE unsigned make_udp_echo(const std::uint8_t* request, const UdpView& u,
                                      std::uint8_t* reply) {
  const unsigned ihl = (request[kEthernetBytes] & 0x0f) * 4u;
  const unsigned n = kEthernetBytes + ihl + 8 + u.payload_bytes;
  for (unsigned i = 0; i < n; ++i) reply[i] = request[i];
  for (unsigned i = 0; i < 6; ++i) {
    reply[i] = request[6 + i];
    reply[6 + i] = request[i];
  }
  std::uint8_t* ip = reply + kEthernetBytes;
  for (unsigned i = 0; i < 4; ++i) {
    ip[12 + i] = request[kEthernetBytes + 16 + i];
    ip[16 + i] = request[kEthernetBytes + 12 + i];
  }
  store16(ip + 2, static_cast<std::uint16_t>(ihl + 8 + u.payload_bytes));
  ip[8] = 64;
  store16(ip + 10, 0);
  store16(ip + 10, internet_checksum(ip, ihl));
  std::uint8_t* udp = ip + ihl;
  store16(udp, u.dst_port);
  store16(udp + 2, u.src_port);
  store16(udp + 4, static_cast<std::uint16_t>(8 + u.payload_bytes));
  store16(udp + 6, 0);
  return n;
}

inline constexpr std::uint8_t kProtocolTcp = 6;
inline constexpr std::uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpPsh = 0x08,
                              kTcpAck = 0x10;

GNIO_HD_INLINE void store32(std::uint8_t* p, std::uint32_t v) {
  store16(p, static_cast<std::uint16_t>(v >> 16));
  store16(p + 2, static_cast<std::uint16_t>(v));
}

/// Where a TCP segment's parts are in a frame; valid only when ok.
struct TcpView {
  bool ok = false;
  std::uint32_t src_ip = 0, dst_ip = 0;
  std::uint16_t src_port = 0, dst_port = 0;
  std::uint32_t seq = 0, ack = 0;
  std::uint8_t flags = 0;
  std::uint8_t* payload = nullptr;
  unsigned payload_bytes = 0;
};

/// The TCP checksum of `segment` (`bytes` long, checksum field zeroed) between `src` and `dst`.
GNIO_HD_INLINE std::uint16_t tcp_checksum(std::uint32_t src, std::uint32_t dst,
                                          const std::uint8_t* segment, unsigned bytes) {
  std::uint32_t sum =
      (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + kProtocolTcp + bytes;
  for (unsigned i = 0; i + 1 < bytes; i += 2) sum += load16(segment + i);
  if (bytes & 1) sum += static_cast<std::uint32_t>(segment[bytes - 1]) << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

/// Parses an Ethernet frame carrying TCP over IPv4 (the IPv4 checks of parse_ipv4, a data offset
/// within the segment; the TCP checksum when `verify_checksum`). Off by default: a sender on the
/// same host (veth) leaves the checksum to an offload that never happens before XDP sees it.
GNIO_HD_INLINE TcpView parse_tcp(std::uint8_t* frame, unsigned length,
                                 bool verify_checksum = false) {
  TcpView t;
  const Ipv4View v = parse_ipv4(frame, length);
  if (!v.ok || v.protocol != kProtocolTcp || v.payload_bytes < 20) return t;
  const std::uint8_t* h = v.payload;
  const unsigned offset = (h[12] >> 4) * 4u;
  if (offset < 20 || offset > v.payload_bytes) return t;
  t.src_ip = load32(v.ip + 12);
  t.dst_ip = load32(v.ip + 16);
  if (verify_checksum && tcp_checksum(t.src_ip, t.dst_ip, h, v.payload_bytes) != 0) return t;
  t.ok = true;
  t.src_port = load16(h);
  t.dst_port = load16(h + 2);
  t.seq = load32(h + 4);
  t.ack = load32(h + 8);
  t.flags = h[13];
  t.payload = v.payload + offset;
  t.payload_bytes = v.payload_bytes - offset;
  return t;
}

/// Writes into `reply` a TCP segment answering `t` (from `request`): addresses and ports swapped,
/// sequence `seq`, acknowledging `ack`, `flags`, `data` (`data_bytes`) as its payload, a 20-byte
/// header without options, window 65535, both checksums. Returns the frame's length.
GNIO_HD_INLINE unsigned make_tcp_reply(const std::uint8_t* request, const TcpView& t,
                                       std::uint32_t seq, std::uint32_t ack, std::uint8_t flags,
                                       const std::uint8_t* data, unsigned data_bytes,
                                       std::uint8_t* reply) {
  for (unsigned i = 0; i < 6; ++i) {
    reply[i] = request[6 + i];
    reply[6 + i] = request[i];
  }
  store16(reply + 12, kEtherTypeIpv4);
  std::uint8_t* ip = reply + kEthernetBytes;
  const unsigned segment = 20 + data_bytes;
  ip[0] = 0x45;
  ip[1] = 0;
  store16(ip + 2, static_cast<std::uint16_t>(20 + segment));
  store16(ip + 4, 0);
  store16(ip + 6, 0x4000);  // don't fragment
  ip[8] = 64;
  ip[9] = kProtocolTcp;
  store16(ip + 10, 0);
  store32(ip + 12, t.dst_ip);
  store32(ip + 16, t.src_ip);
  store16(ip + 10, internet_checksum(ip, 20));
  std::uint8_t* h = ip + 20;
  store16(h, t.dst_port);
  store16(h + 2, t.src_port);
  store32(h + 4, seq);
  store32(h + 8, ack);
  h[12] = 5 << 4;
  h[13] = flags;
  store16(h + 14, 65535);
  store16(h + 16, 0);
  store16(h + 18, 0);
  for (unsigned i = 0; i < data_bytes; ++i) h[20 + i] = data[i];
  store16(h + 16, tcp_checksum(t.dst_ip, t.src_ip, h, segment));
  return kEthernetBytes + 20 + segment;
}

/// What make_echo_reply() made of a frame.
enum class EchoVerdict : std::uint8_t {
  Reply,           ///< a reply was written
  NotIpv4,         ///< not an Ethernet IPv4 frame (or its IP header is malformed)
  NotEchoRequest,  ///< IPv4, but not an ICMP echo request
  BadChecksum,     ///< an echo request whose ICMP checksum is wrong
};

/// Writes into `reply` (room for `length` bytes) the ICMP echo reply to the frame `request`:
/// addresses swapped, the reply's TTL set to `ttl` (so a receiver can tell who answered), both
/// checksums computed. Returns the verdict; the reply's length equals the request's Ethernet +
/// IP total length.
GNIO_HD_INLINE EchoVerdict make_echo_reply(std::uint8_t* request, unsigned length,
                                           std::uint8_t* reply, std::uint8_t ttl,
                                           unsigned* reply_length) {
  const Ipv4View v = parse_ipv4(request, length);
  if (!v.ok) return EchoVerdict::NotIpv4;
  if (v.protocol != kProtocolIcmp || v.payload_bytes < 8 || v.payload[0] != kIcmpEchoRequest ||
      v.payload[1] != 0)
    return EchoVerdict::NotEchoRequest;
  if (internet_checksum(v.payload, v.payload_bytes) != 0) return EchoVerdict::BadChecksum;
  const unsigned n = kEthernetBytes + v.total_bytes;
  for (unsigned i = 0; i < n; ++i) reply[i] = request[i];
  for (unsigned i = 0; i < 6; ++i) {  // Ethernet: back to the sender
    reply[i] = request[6 + i];
    reply[6 + i] = request[i];
  }
  std::uint8_t* ip = reply + kEthernetBytes;
  for (unsigned i = 0; i < 4; ++i) {  // IPv4: source and destination swapped
    ip[12 + i] = request[kEthernetBytes + 16 + i];
    ip[16 + i] = request[kEthernetBytes + 12 + i];
  }
  ip[8] = ttl;
  store16(ip + 10, 0);
  store16(ip + 10, internet_checksum(ip, v.header_bytes));
  std::uint8_t* icmp = ip + v.header_bytes;
  icmp[0] = kIcmpEchoReply;
  store16(icmp + 2, 0);
  store16(icmp + 2, internet_checksum(icmp, v.payload_bytes));
  *reply_length = n;
  return EchoVerdict::Reply;
}

}  // namespace gnio::packet
