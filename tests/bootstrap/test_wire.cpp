// Unit tests of the bootstrap wire format, stream parser, unique id text and small helpers.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/launch_env.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"

namespace gnio::bootstrap {
namespace {

TEST(Wire, HelloRoundTripAndRejects) {
  Hello h{Purpose::Peer, 0x0123456789abcdefull, 5, 8};
  unsigned char b[kHelloBytes];
  encode_hello(h, b);
  auto d = decode_hello(b, sizeof(b));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->purpose, Purpose::Peer);
  EXPECT_EQ(d->token, h.token);
  EXPECT_EQ(d->rank, 5);
  EXPECT_EQ(d->size, 8);

  EXPECT_FALSE(decode_hello(b, sizeof(b) - 1));
  EXPECT_FALSE(decode_hello(nullptr, sizeof(b)));
  auto corrupt = [&](int at, unsigned char v) {
    unsigned char c[kHelloBytes];
    std::memcpy(c, b, sizeof(c));
    c[at] = v;
    return decode_hello(c, sizeof(c));
  };
  EXPECT_FALSE(corrupt(0, 'X'));    // magic
  EXPECT_FALSE(corrupt(4, 99));     // version
  EXPECT_FALSE(corrupt(6, 0));      // purpose 0
  EXPECT_FALSE(corrupt(6, 77));     // purpose unknown
  EXPECT_FALSE(corrupt(16, 8));     // rank == size
  EXPECT_FALSE(corrupt(19, 0x80));  // negative rank
  EXPECT_FALSE(corrupt(20, 0));     // size 0
  EXPECT_FALSE(corrupt(23, 0x40));  // size above kMaxRanks
}

TEST(Wire, FrameHeaderBoundsTheLength) {
  FrameHeader f{FrameType::Coll, 3, 7, -5, 1000};
  unsigned char b[kFrameHeaderBytes];
  encode_frame_header(f, b);
  auto d = decode_frame_header(b, sizeof(b), 1000);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->type, FrameType::Coll);
  EXPECT_EQ(d->flags, 3);
  EXPECT_EQ(d->src, 7);
  EXPECT_EQ(d->tag, -5);
  EXPECT_EQ(d->length, 1000u);
  EXPECT_FALSE(decode_frame_header(b, sizeof(b), 999));  // over the receiver's limit
  f.length = ~0ull;
  encode_frame_header(f, b);
  EXPECT_FALSE(decode_frame_header(b, sizeof(b), 64ull << 20));
  f.length = 1;
  f.src = -2;
  encode_frame_header(f, b);
  EXPECT_FALSE(decode_frame_header(b, sizeof(b), 10));
  f.src = 0;
  f.type = static_cast<FrameType>(0);
  encode_frame_header(f, b);
  EXPECT_FALSE(decode_frame_header(b, sizeof(b), 10));
}

TEST(Wire, RankRecordsAndTables) {
  RankRecord r;
  r.listen.family = 4;
  r.listen.port = 41000;
  r.listen.bytes = {10, 1, 2, 3};
  r.pid = 4242;
  r.wait_ms = 1500;
  r.timeout_ms = 2000;
  r.host = "node-a\x01" + std::string(100, 'x');  // unprintable and too long: cleaned up
  unsigned char b[kRankRecordBytes];
  encode_rank_record(r, b);
  auto d = decode_rank_record(b, sizeof(b));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->listen, r.listen);
  EXPECT_EQ(d->pid, 4242u);
  EXPECT_EQ(d->wait_ms, 1500u);
  EXPECT_EQ(d->timeout_ms, 2000u);
  EXPECT_EQ(d->host.size(), kMaxHostName);
  EXPECT_EQ(d->host.substr(0, 7), "node-a?");

  unsigned char bad[kRankRecordBytes];
  std::memcpy(bad, b, sizeof(b));
  bad[0] = 5;  // family
  EXPECT_FALSE(decode_rank_record(bad, sizeof(bad)));
  std::memcpy(bad, b, sizeof(b));
  bad[2] = bad[3] = 0;  // port 0
  EXPECT_FALSE(decode_rank_record(bad, sizeof(bad)));
  std::memcpy(bad, b, sizeof(b));
  bad[20] = 1;  // IPv4 with bytes beyond the first 4
  EXPECT_FALSE(decode_rank_record(bad, sizeof(bad)));

  std::vector<RankRecord> table(3, r);
  table[1].listen.port = 41001;
  auto enc = encode_table(table);
  auto dec = decode_table(enc.data(), enc.size(), 3);
  ASSERT_TRUE(dec);
  EXPECT_EQ((*dec)[1].listen.port, 41001);
  EXPECT_FALSE(decode_table(enc.data(), enc.size(), 2));
  EXPECT_FALSE(decode_table(enc.data(), enc.size() - 1, 3));
}

TEST(Wire, ErrorPayloadIsSafeToPrint) {
  auto enc = encode_error_payload({1, std::string("ranks 2, 3\n\x1b[31mred")});
  auto dec = decode_error_payload(enc.data(), enc.size(), 6);
  ASSERT_TRUE(dec);
  EXPECT_EQ(dec->error_class, 1u);
  EXPECT_EQ(dec->message, "ranks 2, 3??[31mred");
  EXPECT_FALSE(decode_error_payload(enc.data(), enc.size(), 1));  // class out of range
  EXPECT_FALSE(decode_error_payload(enc.data(), 3, 6));
  auto huge = encode_error_payload({0, std::string(10000, 'a')});
  EXPECT_EQ(huge.size(), kMaxErrorPayload);
}

TEST(Wire, StreamParserByteByByte) {
  std::vector<unsigned char> stream(kHelloBytes);
  encode_hello({Purpose::Peer, 42, 1, 2}, stream.data());
  for (std::uint64_t len : {0ull, 5ull, 300ull}) {
    std::vector<unsigned char> head(kFrameHeaderBytes);
    encode_frame_header({FrameType::Data, 0, 1, static_cast<std::int32_t>(len), len}, head.data());
    stream.insert(stream.end(), head.begin(), head.end());
    for (std::uint64_t i = 0; i < len; ++i) stream.push_back(static_cast<unsigned char>(i + 1));
  }
  StreamParser p(true, 1000);
  int hellos = 0, frames = 0;
  std::size_t pos = 0;
  while (pos < stream.size()) {
    auto buf = p.next_buffer();
    ASSERT_FALSE(buf.empty());
    buf[0] = stream[pos++];
    auto ev = p.commit(1);
    ASSERT_NE(ev, StreamParser::Event::Error) << p.error();
    if (ev == StreamParser::Event::Hello) {
      ++hellos;
      EXPECT_EQ(p.hello().token, 42u);
    }
    if (ev == StreamParser::Event::Frame) {
      auto payload = p.take_payload();
      EXPECT_EQ(payload.size(), static_cast<std::size_t>(p.header().tag));
      for (std::size_t i = 0; i < payload.size(); ++i) EXPECT_EQ(payload[i], (i + 1) & 0xff);
      ++frames;
    }
  }
  EXPECT_EQ(hellos, 1);
  EXPECT_EQ(frames, 3);
  EXPECT_FALSE(p.mid_message());
}

TEST(Wire, StreamParserRefusesGarbageEarlyAndOversize) {
  StreamParser garbage(true, 100);
  auto buf = garbage.next_buffer();
  std::memcpy(buf.data(), "GET ", 4);
  EXPECT_EQ(garbage.commit(4), StreamParser::Event::Error);  // after 4 bytes, not 24
  EXPECT_TRUE(garbage.next_buffer().empty());

  StreamParser big(false, 100);
  unsigned char head[kFrameHeaderBytes];
  encode_frame_header({FrameType::Data, 0, 0, 0, 101}, head);
  buf = big.next_buffer();
  std::memcpy(buf.data(), head, sizeof(head));
  EXPECT_EQ(big.commit(sizeof(head)), StreamParser::Event::Error);
  EXPECT_NE(std::string(big.error()).find("limit"), std::string::npos);
}

TEST(UniqueIdText, RoundTrip) {
  UniqueIdFields f;
  f.root.family = 6;
  f.root.port = 29501;
  f.root.scope_id = 3;
  for (int i = 0; i < 16; ++i) f.root.bytes[i] = static_cast<std::uint8_t>(0xf0 + i);
  f.token = 0xfeedfacecafebeefull;
  UniqueId id;
  encode_unique_id(f, id.bytes);
  std::string text = to_string(id);
  EXPECT_EQ(text.size(), 256u);
  UniqueId back = unique_id_from_string("  " + text + "\n");
  EXPECT_EQ(0, std::memcmp(back.bytes, id.bytes, sizeof(id.bytes)));
  std::string upper = text;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  back = unique_id_from_string(upper);
  EXPECT_EQ(0, std::memcmp(back.bytes, id.bytes, sizeof(id.bytes)));
  auto dec = decode_unique_id(back.bytes, sizeof(back.bytes));
  ASSERT_TRUE(dec);
  EXPECT_EQ(dec->token, f.token);
  EXPECT_EQ(dec->root, f.root);
}

TEST(UniqueIdText, MalformedTextIsInvalidArgument) {
  UniqueIdFields f;
  f.root.port = 1234;
  f.root.bytes = {127, 0, 0, 1};
  f.token = 99;
  UniqueId id;
  encode_unique_id(f, id.bytes);
  std::string good = to_string(id);
  auto expect_invalid = [](const std::string& text, const char* words) {
    try {
      unique_id_from_string(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_invalid("", "256 hex digits");
  expect_invalid(good.substr(1), "256 hex digits");
  expect_invalid(good + "0", "256 hex digits");
  std::string nonhex = good;
  nonhex[17] = 'g';
  expect_invalid(nonhex, "character 17");
  std::string flipped = good;
  flipped[70] = flipped[70] == '0' ? '1' : '0';  // inside the token: checksum catches it
  expect_invalid(flipped, "damaged");
  std::string tail = good;
  tail[255] = '1';  // padding must stay zero
  expect_invalid(tail, "damaged");
  expect_invalid(std::string(256, '0'), "not a gnio unique id");
}

TEST(UniqueIdText, CreateUniqueIdStartsAReachableRoot) {
  UniqueId id = create_unique_id();
  auto f = decode_unique_id(id.bytes, sizeof(id.bytes));
  ASSERT_TRUE(f);
  SockAddr root = SockAddr::from_net(f->root);
  EXPECT_FALSE(root.is_wildcard());
  int err = 0;
  Fd fd = connect_tcp(root, Deadline::after(2.0), &err);
  EXPECT_TRUE(fd) << "cannot connect to the root at " << root.to_string() << ": " << err;
  UniqueId other = create_unique_id();
  auto g = decode_unique_id(other.bytes, sizeof(other.bytes));
  ASSERT_TRUE(g);
  EXPECT_NE(f->token, g->token);
}

TEST(Helpers, RankListsAndTokens) {
  EXPECT_EQ(format_rank_list({3}), "3");
  EXPECT_EQ(format_rank_list({2, 3}), "2, 3");
  EXPECT_EQ(format_rank_list({0, 2, 3, 4, 9}), "0, 2-4, 9");
  std::vector<int> many;
  for (int i = 0; i < 100; i += 2) many.push_back(i);
  EXPECT_NE(format_rank_list(many, 4).find("... (50 in all)"), std::string::npos);

  std::uint64_t t = 0;
  EXPECT_TRUE(parse_job_token("0xDEADbeef", &t));
  EXPECT_EQ(t, 0xdeadbeefull);
  EXPECT_TRUE(parse_job_token("ffffffffffffffff", &t));
  EXPECT_EQ(t, ~0ull);
  EXPECT_FALSE(parse_job_token("", &t));
  EXPECT_FALSE(parse_job_token("0x", &t));
  EXPECT_FALSE(parse_job_token("12345678901234567", &t));
  EXPECT_FALSE(parse_job_token("xyz", &t));
}

TEST(Helpers, SockAddrText) {
  auto a = SockAddr::parse_numeric("10.0.0.1", 29500);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->to_string(), "10.0.0.1:29500");
  auto b = SockAddr::parse_numeric("[::1]", 7);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->to_string(), "[::1]:7");
  EXPECT_TRUE(b->is_loopback());
  EXPECT_FALSE(SockAddr::parse_numeric("not-an-ip", 1));
  EXPECT_EQ(SockAddr::from_net(a->to_net()).to_string(), a->to_string());
}

}  // namespace
}  // namespace gnio::bootstrap
