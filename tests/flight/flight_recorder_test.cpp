// The flight-recorder ring (src/core/flight_recorder.*): sequence numbers per stream, wraparound
// keeps the newest entries in order, repeated local events are coalesced, and the JSON dump holds
// what the ring holds.
#include "core/flight_recorder.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace gnio::detail {
namespace {

FlightEntry collective(int channel, std::uint64_t count) {
  FlightEntry e;
  e.event = FlightEvent::Collective;
  e.channel = channel;
  e.count = count;
  e.what = "allreduce";
  e.type = "f32";
  e.op = "sum";
  e.algo = "ll";
  return e;
}

FlightEntry event(FlightEvent ev, std::uint64_t stream = 0) {
  FlightEntry e;
  e.event = ev;
  e.stream = stream;
  return e;
}

TEST(FlightRecorder, DisabledRecordsNothing) {
  FlightRecorder f(0);
  EXPECT_FALSE(f.enabled());
  f.record(collective(0, 7));
  EXPECT_EQ(f.recorded(), 0u);
  EXPECT_TRUE(f.snapshot().empty());
}

TEST(FlightRecorder, SequencesPerStream) {
  FlightRecorder f(16);
  f.record(event(FlightEvent::Alloc));  // host #1
  f.record(collective(0, 10));          // channel 0 #1
  f.record(collective(1, 11));          // channel 1 #1
  f.record(collective(0, 12));          // channel 0 #2
  f.record(event(FlightEvent::Split));  // host #2
  f.record(event(FlightEvent::Check));  // local
  const auto s = f.snapshot();
  ASSERT_EQ(s.size(), 6u);
  const std::uint64_t want_stream_seq[] = {1, 1, 1, 2, 2, 0};
  const int want_channel[] = {-1, 0, 1, 0, -1, -1};
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].seq, i + 1) << i;
    EXPECT_EQ(s[i].stream_seq, want_stream_seq[i]) << i;
    EXPECT_EQ(s[i].channel, want_channel[i]) << i;
    if (i > 0) {
      EXPECT_GE(s[i].time_ns, s[i - 1].time_ns) << i;
    }
  }
  EXPECT_EQ(s[3].count, 12u);
}

TEST(FlightRecorder, WraparoundKeepsTheNewestInOrder) {
  FlightRecorder f(5);
  for (std::uint64_t i = 1; i <= 13; ++i) f.record(collective(2, 100 + i));
  EXPECT_EQ(f.recorded(), 13u);
  const auto s = f.snapshot();
  ASSERT_EQ(s.size(), 5u);
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].seq, 9 + i);
    EXPECT_EQ(s[i].stream_seq, 9 + i);
    EXPECT_EQ(s[i].count, 109 + i);
  }
}

TEST(FlightRecorder, RepeatedLocalEventsAreCoalesced) {
  FlightRecorder f(4);
  f.record(collective(0, 1));
  for (int i = 0; i < 1000; ++i) f.record(event(FlightEvent::Check));
  f.record(event(FlightEvent::Synchronize, 0x10));
  f.record(event(FlightEvent::Synchronize, 0x10));
  f.record(event(FlightEvent::Synchronize, 0x20));  // another stream: a new entry
  const auto s = f.snapshot();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].event, FlightEvent::Collective);
  EXPECT_EQ(s[1].event, FlightEvent::Check);
  EXPECT_EQ(s[1].count, 1000u);
  EXPECT_EQ(s[2].count, 2u);
  EXPECT_EQ(s[3].stream, 0x20u);
}

TEST(FlightRecorder, DumpWritesJson) {
  FlightRecorder f(3);
  for (int i = 0; i < 4; ++i) f.record(collective(0, 40 + i));
  char dir[] = "/tmp/gnio-flight-unit-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = flight_dump_path(dir, 0xabcdef12u, 3);
  EXPECT_EQ(path, std::string(dir) + "/gnio-flight-abcdef12-rank3.json");
  std::string error;
  ASSERT_TRUE(f.dump(path, 0xabcdef12u, 3, 4, "timeout", "said \"why\"\n", &error)) << error;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  EXPECT_NE(s.find("\"comm\": \"abcdef12\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"rank\": 3"), std::string::npos) << s;
  EXPECT_NE(s.find("\"recorded\": 4"), std::string::npos) << s;
  EXPECT_NE(s.find("said \\\"why\\\"\\u000a"), std::string::npos) << s;
  EXPECT_EQ(s.find("\"count\": 40,"), std::string::npos) << s;  // overwritten
  EXPECT_NE(s.find("\"stream_seq\": 4"), std::string::npos) << s;
  EXPECT_FALSE(f.dump(std::string(dir) + "/no/such/dir/x.json", 1, 0, 1, "abort", "", &error));
  EXPECT_NE(error.find("no/such/dir"), std::string::npos) << error;
  std::remove(path.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace gnio::detail
