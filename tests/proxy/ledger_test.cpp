// TicketLedger (the order in which the ring's head and done move) and OpenRequests (which answers
// a proxy uses), on their own.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "transport/proxy/open_requests.hpp"
#include "transport/proxy/ticket_ledger.hpp"

namespace gnio::proxy {
namespace {

struct Entry {
  bool read = false;      // its source was read
  bool finished = false;  // applied at its target
};

bool source_read(const Entry& e) {
  return e.read;
}
bool finished(const Entry& e) {
  return e.finished;
}

TEST(TicketLedger, HeadPassesTicketsInOrderOnly) {
  TicketLedger<Entry> ledger;
  for (int i = 0; i < 4; ++i) ledger.open();
  EXPECT_EQ(ledger.next(), 4u);
  ledger[1].read = ledger[2].read = true;  // ticket 0 still reads its source
  EXPECT_FALSE(ledger.pass_head(source_read));
  EXPECT_EQ(ledger.head(), 0u);
  ledger[0].read = true;
  EXPECT_TRUE(ledger.pass_head(source_read));
  EXPECT_EQ(ledger.head(), 3u);  // stops at ticket 3
  ledger[3].read = true;
  EXPECT_TRUE(ledger.pass_head(source_read));
  EXPECT_EQ(ledger.head(), 4u);
  EXPECT_FALSE(ledger.pass_head(source_read));  // nothing more open
}

TEST(TicketLedger, DoneNeverPassesHead) {
  TicketLedger<Entry> ledger;
  for (int i = 0; i < 3; ++i) ledger.open().finished = true;
  // Applied (acked) but sources not yet read: nothing retires.
  EXPECT_FALSE(ledger.retire(finished));
  EXPECT_EQ(ledger.done(), 0u);
  ledger[0].read = ledger[1].read = true;
  ledger.pass_head(source_read);
  EXPECT_TRUE(ledger.retire(finished));
  EXPECT_EQ(ledger.done(), 2u);
  EXPECT_EQ(ledger.head(), 2u);
  EXPECT_FALSE(ledger.empty());  // ticket 2 is open
}

TEST(TicketLedger, RetiresOldestFirstAndKeepsEntriesInPlace) {
  TicketLedger<Entry> ledger;
  std::vector<Entry*> where;
  for (int i = 0; i < 100; ++i) {
    Entry& e = ledger.open();
    e.read = true;
    where.push_back(&e);
  }
  ledger.pass_head(source_read);
  ledger[1].finished = true;  // ticket 0 is not: nothing retires
  EXPECT_FALSE(ledger.retire(finished));
  ledger[0].finished = true;
  EXPECT_TRUE(ledger.retire(finished));
  EXPECT_EQ(ledger.done(), 2u);
  // Retiring and opening more moves no open entry (completion callbacks hold them).
  for (int i = 0; i < 1000; ++i) ledger.open();
  for (std::uint64_t t = 2; t < 100; ++t) EXPECT_EQ(&ledger[t], where[t]);
  EXPECT_EQ(&ledger.oldest(), where[2]);
}

TEST(OpenRequests, AnswerIsTakenOnlyWhenItMatches) {
  OpenRequests open;
  open.open(7, 0, OpenRequest{3, RequestKind::Get, 64, 0x1000});
  // Another ticket, part, peer, kind or size: refused, and the request stays open.
  EXPECT_FALSE(open.take(8, 0, 3, RequestKind::Get, 64));
  EXPECT_FALSE(open.take(7, 1, 3, RequestKind::Get, 64));
  EXPECT_FALSE(open.take(7, 0, 2, RequestKind::Get, 64));
  EXPECT_FALSE(open.take(7, 0, 3, RequestKind::Update, 64));
  EXPECT_FALSE(open.take(7, 0, 3, RequestKind::Get, 32));
  const auto taken = open.take(7, 0, 3, RequestKind::Get, 64);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->where, 0x1000u);
  // Once: a second answer to the same request is refused.
  EXPECT_FALSE(open.take(7, 0, 3, RequestKind::Get, 64));
}

TEST(OpenRequests, PartsOfOneTicketAreAnsweredSeparately) {
  OpenRequests open;
  for (std::uint64_t part = 0; part < 4; ++part)
    open.open(5, part * 4096, OpenRequest{1, RequestKind::Update, 0, part});
  for (std::uint64_t part : {2u, 0u, 3u, 1u}) {
    const auto taken = open.take(5, part * 4096, 1, RequestKind::Update, 0);
    ASSERT_TRUE(taken) << part;
    EXPECT_EQ(taken->where, part);
  }
  EXPECT_FALSE(open.take(5, 0, 1, RequestKind::Update, 0));
}

TEST(OpenRequests, AnsweredTicketsComeOnceInOrderAcrossThreads) {
  OpenRequests open;
  constexpr std::uint64_t kTickets = 10000;
  for (std::uint64_t t = 0; t < kTickets; ++t) open.open(t, 0, OpenRequest{1, RequestKind::Update});
  // The receiving thread takes and answers while the sending thread collects (a take that fails
  // ends the receiver early, and the collecting loop with it).
  std::atomic<bool> receiver_done{false};
  std::uint64_t taken = 0;
  std::thread receiver([&] {
    for (std::uint64_t t = 0; t < kTickets && open.take(t, 0, 1, RequestKind::Update, 0); ++t) {
      open.answered(t, 1);
      ++taken;
    }
    receiver_done.store(true, std::memory_order_release);
  });
  std::vector<AnsweredRequest> seen;
  for (bool last = false; !last;) {
    last = receiver_done.load(std::memory_order_acquire);
    const std::vector<AnsweredRequest> got = open.answered();
    seen.insert(seen.end(), got.begin(), got.end());
  }
  receiver.join();
  ASSERT_EQ(taken, kTickets);
  ASSERT_EQ(seen.size(), kTickets);
  for (std::uint64_t t = 0; t < kTickets; ++t) {
    ASSERT_EQ(seen[t].ticket, t);
    ASSERT_EQ(seen[t].peer, 1);
  }
  EXPECT_TRUE(open.answered().empty());
}

}  // namespace
}  // namespace gnio::proxy
