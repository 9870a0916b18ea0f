// The packet helpers the samples build replies with: the Internet checksum against RFC 1071's
// example, an echo reply built from a real request (addresses swapped, TTL set, both checksums
// valid, payload kept), and every malformed variant of the request (each truncation, wrong
// EtherType, IP version, header length, total length, either checksum, another protocol)
// rejected with its verdict and nothing written.
#include "gnio/device/packet.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using gnio::packet::EchoVerdict;
using gnio::packet::internet_checksum;
using gnio::packet::make_echo_reply;

std::vector<std::uint8_t> echo_request(unsigned payload = 56) {
  std::vector<std::uint8_t> f = {
      0x02, 0,    0, 0, 0, 0x01,  // destination MAC
      0x02, 0,    0, 0, 0, 0x02,  // source MAC
      0x08, 0x00,                 // IPv4
  };
  const unsigned total = 20 + 8 + payload;
  const std::uint8_t ip[20] = {0x45,
                               0,
                               static_cast<std::uint8_t>(total >> 8),
                               static_cast<std::uint8_t>(total),
                               0x12,
                               0x34,
                               0x40,
                               0,
                               64,
                               1,
                               0,
                               0,
                               10,
                               98,
                               0,
                               2,
                               10,
                               98,
                               0,
                               1};
  f.insert(f.end(), ip, ip + 20);
  const std::uint16_t ipc = internet_checksum(f.data() + 14, 20);
  f[24] = static_cast<std::uint8_t>(ipc >> 8);
  f[25] = static_cast<std::uint8_t>(ipc);
  const std::uint8_t icmp[8] = {8, 0, 0, 0, 0x00, 0x07, 0x00, 0x01};
  f.insert(f.end(), icmp, icmp + 8);
  for (unsigned i = 0; i < payload; ++i) f.push_back(static_cast<std::uint8_t>(i * 7 + 3));
  const std::uint16_t c = internet_checksum(f.data() + 34, 8 + payload);
  f[36] = static_cast<std::uint8_t>(c >> 8);
  f[37] = static_cast<std::uint8_t>(c);
  return f;
}

TEST(Packet, ChecksumMatchesRfc1071) {
  // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum (one's complement) to ddf2.
  const std::uint8_t b[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(internet_checksum(b, sizeof(b)), static_cast<std::uint16_t>(~0xddf2));
  const std::uint8_t odd[] = {0x01};  // an odd byte counts as the high byte of a word
  EXPECT_EQ(internet_checksum(odd, 1), static_cast<std::uint16_t>(~0x0100));
}

TEST(Packet, EchoReplyIsTheRequestTurnedAround) {
  for (unsigned payload : {0u, 1u, 56u, 1472u}) {
    std::vector<std::uint8_t> req = echo_request(payload), reply(req.size(), 0xee);
    unsigned n = 0;
    ASSERT_EQ(make_echo_reply(req.data(), static_cast<unsigned>(req.size()), reply.data(), 42, &n),
              EchoVerdict::Reply)
        << payload;
    ASSERT_EQ(n, req.size());
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(reply[i], req[6 + i]);
      EXPECT_EQ(reply[6 + i], req[i]);
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(reply[26 + i], req[30 + i]);
      EXPECT_EQ(reply[30 + i], req[26 + i]);
    }
    EXPECT_EQ(reply[22], 42) << "TTL";
    EXPECT_EQ(reply[34], 0) << "echo reply";
    EXPECT_EQ(internet_checksum(reply.data() + 14, 20), 0) << "IP header checksum";
    EXPECT_EQ(internet_checksum(reply.data() + 34, 8 + payload), 0) << "ICMP checksum";
    for (unsigned i = 0; i < payload; ++i) ASSERT_EQ(reply[42 + i], req[42 + i]) << i;
  }
}

TEST(Packet, MalformedRequestsAreRejectedAndNothingIsWritten) {
  const std::vector<std::uint8_t> good = echo_request();
  auto verdict = [](std::vector<std::uint8_t> f, unsigned length) {
    std::vector<std::uint8_t> reply(f.size() + 64, 0xee);
    unsigned n = 12345;
    const EchoVerdict v = make_echo_reply(f.data(), length, reply.data(), 42, &n);
    if (v != EchoVerdict::Reply) {
      for (std::uint8_t b : reply) EXPECT_EQ(b, 0xee) << "written although rejected";
      EXPECT_EQ(n, 12345u);
    }
    return v;
  };
  // Every truncation: the frame ends before the IP packet does.
  for (unsigned len = 0; len < good.size(); ++len)
    EXPECT_EQ(verdict(good, len), EchoVerdict::NotIpv4) << "truncated to " << len;
  auto changed = [&](unsigned at, std::uint8_t value) {
    std::vector<std::uint8_t> f = good;
    f[at] = value;
    return f;
  };
  const auto size = static_cast<unsigned>(good.size());
  EXPECT_EQ(verdict(changed(12, 0x86), size), EchoVerdict::NotIpv4) << "EtherType IPv6";
  EXPECT_EQ(verdict(changed(14, 0x65), size), EchoVerdict::NotIpv4) << "IP version 6";
  EXPECT_EQ(verdict(changed(14, 0x44), size), EchoVerdict::NotIpv4) << "header length 16";
  EXPECT_EQ(verdict(changed(16, 0x7f), size), EchoVerdict::NotIpv4)
      << "total length past the frame";
  EXPECT_EQ(verdict(changed(25, good[25] ^ 1), size), EchoVerdict::NotIpv4) << "IP checksum";
  EXPECT_EQ(verdict(changed(37, good[37] ^ 1), size), EchoVerdict::BadChecksum) << "ICMP checksum";
  std::vector<std::uint8_t> reply_type = changed(34, 0);  // an echo reply is not answered
  EXPECT_EQ(verdict(reply_type, size), EchoVerdict::NotEchoRequest);
  std::vector<std::uint8_t> udp = changed(23, 17);  // protocol UDP (IP checksum fixed below)
  udp[24] = udp[25] = 0;
  const std::uint16_t c = internet_checksum(udp.data() + 14, 20);
  udp[24] = static_cast<std::uint8_t>(c >> 8);
  udp[25] = static_cast<std::uint8_t>(c);
  EXPECT_EQ(verdict(udp, size), EchoVerdict::NotEchoRequest) << "UDP";
  // Ethernet padding after the IP packet is allowed (and not echoed).
  std::vector<std::uint8_t> padded = good;
  padded.resize(good.size() + 10, 0);
  EXPECT_EQ(verdict(padded, size + 10), EchoVerdict::Reply);
}

TEST(Packet, UdpDatagramsAreParsedAndBadOnesRejected) {
  // The echo request's frame turned into a UDP datagram 4000 -> 9 carrying 20 bytes.
  std::vector<std::uint8_t> f = echo_request(20 - 8 + 8);
  f[23] = 17;
  f[24] = f[25] = 0;
  const std::uint16_t c = internet_checksum(f.data() + 14, 20);
  f[24] = static_cast<std::uint8_t>(c >> 8);
  f[25] = static_cast<std::uint8_t>(c);
  const std::uint8_t udp[8] = {0x0f, 0xa0, 0x00, 0x09, 0x00, 28, 0, 0};
  std::copy(udp, udp + 8, f.begin() + 34);
  auto u = gnio::packet::parse_udp(f.data(), static_cast<unsigned>(f.size()));
  ASSERT_TRUE(u.ok);
  EXPECT_EQ(u.src_ip, 0x0a620002u);
  EXPECT_EQ(u.dst_ip, 0x0a620001u);
  EXPECT_EQ(u.src_port, 4000);
  EXPECT_EQ(u.dst_port, 9);
  EXPECT_EQ(u.payload_bytes, 20u);
  EXPECT_EQ(u.payload, f.data() + 42);
  for (unsigned len = 0; len < f.size(); ++len)
    EXPECT_FALSE(gnio::packet::parse_udp(f.data(), len).ok) << "truncated to " << len;
  f[39] = 29;  // UDP length past the IP packet
  EXPECT_FALSE(gnio::packet::parse_udp(f.data(), static_cast<unsigned>(f.size())).ok);
  f[39] = 7;  // shorter than its own header
  EXPECT_FALSE(gnio::packet::parse_udp(f.data(), static_cast<unsigned>(f.size())).ok);
  std::vector<std::uint8_t> icmp = echo_request();
  EXPECT_FALSE(gnio::packet::parse_udp(icmp.data(), static_cast<unsigned>(icmp.size())).ok);
}

TEST(Packet, WrittenUdpHeadersParseBack) {
  const std::uint8_t dst_mac[6] = {2, 0, 0, 0, 0, 9}, src_mac[6] = {2, 0, 0, 0, 0, 8};
  std::vector<std::uint8_t> f(42 + 100, 0xee);
  ASSERT_EQ(gnio::packet::write_udp_headers(f.data(), dst_mac, src_mac, 0x0a000001, 0x0a000002,
                                            4000, 9, 100),
            142u);
  const auto u = gnio::packet::parse_udp(f.data(), static_cast<unsigned>(f.size()));
  ASSERT_TRUE(u.ok) << "the IPv4 checksum is right";
  EXPECT_EQ(u.src_ip, 0x0a000001u);
  EXPECT_EQ(u.dst_ip, 0x0a000002u);
  EXPECT_EQ(u.src_port, 4000);
  EXPECT_EQ(u.dst_port, 9);
  EXPECT_EQ(u.payload_bytes, 100u);
  EXPECT_EQ(u.payload, f.data() + 42);
  EXPECT_EQ(f[0], 2);
  EXPECT_EQ(f[5], 9);
  EXPECT_EQ(f[11], 8);
  EXPECT_EQ(f[42], 0xee) << "the payload is the caller's";
}

TEST(Packet, UdpEchoSwapsAddressesAndPortsAndKeepsThePayload) {
  std::vector<std::uint8_t> f = echo_request(20);
  f[23] = 17;
  const std::uint8_t udp[8] = {0x0f, 0xa0, 0x00, 0x07, 0x00, 28, 0, 0};
  std::copy(udp, udp + 8, f.begin() + 34);
  f[24] = f[25] = 0;
  const std::uint16_t c = internet_checksum(f.data() + 14, 20);
  f[24] = static_cast<std::uint8_t>(c >> 8);
  f[25] = static_cast<std::uint8_t>(c);
  f.resize(f.size() + 6, 0);  // Ethernet padding: not echoed
  const auto u = gnio::packet::parse_udp(f.data(), static_cast<unsigned>(f.size()));
  ASSERT_TRUE(u.ok);
  std::vector<std::uint8_t> reply(f.size(), 0xee);
  const unsigned n = gnio::packet::make_udp_echo(f.data(), u, reply.data());
  ASSERT_EQ(n, 14u + 20 + 8 + 20);
  const auto r = gnio::packet::parse_udp(reply.data(), n);
  ASSERT_TRUE(r.ok) << "the reply parses (its IP checksum is right)";
  EXPECT_EQ(r.src_ip, u.dst_ip);
  EXPECT_EQ(r.dst_ip, u.src_ip);
  EXPECT_EQ(r.src_port, 7);
  EXPECT_EQ(r.dst_port, 4000);
  ASSERT_EQ(r.payload_bytes, 20u);
  for (unsigned i = 0; i < 20; ++i) EXPECT_EQ(r.payload[i], u.payload[i]);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(reply[i], f[6 + i]);
  EXPECT_EQ(reply[n], 0xee) << "nothing written past the reply";
}

TEST(Packet, TcpRepliesCarryValidChecksumsAndSwappedEnds) {
  // A client's data segment "GET /" built with make_tcp_reply from a mirrored frame, then
  // answered: both parse with checksums verified; ports, addresses, sequence numbers as asked.
  std::vector<std::uint8_t> base = echo_request(0);
  gnio::packet::TcpView from_server;
  from_server.src_ip = 0x0a620001;  // the reply below goes to the client 10.98.0.2 -> swapped
  from_server.dst_ip = 0x0a620002;
  from_server.src_port = 80;
  from_server.dst_port = 40000;
  std::vector<std::uint8_t> request(200, 0), reply(300, 0xee);
  const std::uint8_t get[] = {'G', 'E', 'T', ' ', '/'};
  const unsigned n = gnio::packet::make_tcp_reply(base.data(), from_server, 1000, 5000,
                                                  gnio::packet::kTcpAck | gnio::packet::kTcpPsh,
                                                  get, sizeof(get), request.data());
  const auto t = gnio::packet::parse_tcp(request.data(), n, true);
  ASSERT_TRUE(t.ok) << "checksums verified";
  EXPECT_EQ(t.src_ip, 0x0a620002u);
  EXPECT_EQ(t.src_port, 40000);
  EXPECT_EQ(t.dst_port, 80);
  EXPECT_EQ(t.seq, 1000u);
  EXPECT_EQ(t.ack, 5000u);
  ASSERT_EQ(t.payload_bytes, sizeof(get));
  EXPECT_EQ(t.payload[0], 'G');
  const unsigned m = gnio::packet::make_tcp_reply(request.data(), t, t.ack, t.seq + t.payload_bytes,
                                                  gnio::packet::kTcpAck | gnio::packet::kTcpFin,
                                                  nullptr, 0, reply.data());
  const auto r = gnio::packet::parse_tcp(reply.data(), m, true);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.dst_port, 40000);
  EXPECT_EQ(r.seq, 5000u);
  EXPECT_EQ(r.ack, 1005u);
  EXPECT_EQ(r.flags, gnio::packet::kTcpAck | gnio::packet::kTcpFin);
  EXPECT_EQ(reply[m], 0xee);
  request[40] ^= 1;  // a flipped bit: the checksum catches it when asked to
  EXPECT_FALSE(gnio::packet::parse_tcp(request.data(), n, true).ok);
  EXPECT_TRUE(gnio::packet::parse_tcp(request.data(), n).ok);
  for (unsigned len = 0; len < n; ++len)
    EXPECT_FALSE(gnio::packet::parse_tcp(request.data(), len).ok) << "truncated to " << len;
}

}  // namespace
