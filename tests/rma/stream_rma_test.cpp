// Host-started one-sided operations on streams (gnio/stream_rma.hpp): every rank puts a pattern
// into its right neighbour, put_signals another and waits on the stream for its left neighbour's
// signal, gets its right neighbour's copy back, and adds to a counter on every rank; each result
// checked element by element, destinations poisoned first. Also as 2 nodes (through the proxy).
#include "gnio/stream_rma.hpp"

#include <vector>

#include "common/gnio_test.hpp"

namespace stream_rma_test {

using gnio::Cmp;
using gnio::SignalOp;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::count_wrong;
using gnio_test::kPoison;
using gnio_test::pattern_byte;
using gnio_test::stream;

constexpr std::size_t kBytes = 100003;  // odd: neither sizes nor offsets aligned

TEST(StreamRma, PutPutSignalGetAndSignal) {
  gnio::Comm& c = comm();
  const int me = c.rank(), n = c.size(), right = (me + 1) % n, left = (me + n - 1) % n;
  SymPtr<char> put_dst = c.alloc<char>(kBytes + 1);
  SymPtr<char> ps_dst = c.alloc<char>(kBytes + 1);
  SymPtr<std::uint64_t> flag = c.alloc<std::uint64_t>(1);
  SymPtr<std::uint64_t> counter = c.alloc<std::uint64_t>(1);
  auto* src = static_cast<char*>(c.alloc_device(kBytes));
  auto* got = static_cast<char*>(c.alloc_device(kBytes));
  std::vector<std::uint8_t> mine(kBytes), poison(kBytes + 1, kPoison);
  for (std::size_t i = 0; i < kBytes; ++i) mine[i] = pattern_byte(me, i, 11);
  gnio_test::to_device(src, mine.data(), kBytes);
  gnio_test::to_device(got, poison.data(), kBytes);
  gnio_test::to_device(c.local(put_dst), poison.data(), kBytes + 1);
  gnio_test::to_device(c.local(ps_dst), poison.data(), kBytes + 1);
  const std::uint64_t zero = 0;
  gnio_test::to_device(c.local(flag), &zero, 8);
  gnio_test::to_device(c.local(counter), &zero, 8);
  c.bootstrap().barrier();

  // At offset 1: unaligned, and byte 0 must stay poisoned.
  gnio::put_on_stream(c, put_dst.byte_offset(1), src, kBytes, right, stream());
  gnio::put_signal_on_stream(c, ps_dst.byte_offset(1), src, kBytes, flag, 7, SignalOp::Set, right,
                             stream());
  gnio::wait_signal_on_stream(c, flag, Cmp::Eq, 7, stream());
  for (int p = 0; p < n; ++p)
    gnio::signal_on_stream(c, counter, me + 1, SignalOp::Add, p, stream());
  c.synchronize(stream());
  c.bootstrap().barrier();  // every rank's put and adds are done
  gnio::get_on_stream(c, got, put_dst.byte_offset(1), kBytes, right, stream());
  c.synchronize(stream());

  std::vector<std::uint8_t> from_left(kBytes + 1, kPoison);
  for (std::size_t i = 0; i < kBytes; ++i) from_left[i + 1] = pattern_byte(left, i, 11);
  std::vector<std::uint8_t> seen(kBytes + 1);
  gnio_test::to_host(seen.data(), c.local(put_dst), kBytes + 1);
  EXPECT_EQ(count_wrong(seen, from_left, "put_on_stream"), 0u);
  gnio_test::to_host(seen.data(), c.local(ps_dst), kBytes + 1);
  EXPECT_EQ(count_wrong(seen, from_left, "put_signal_on_stream"), 0u);
  // The right neighbour's put_dst holds this rank's pattern.
  std::vector<std::uint8_t> back(kBytes);
  gnio_test::to_host(back.data(), got, kBytes);
  EXPECT_EQ(count_wrong(back, mine, "get_on_stream"), 0u);
  std::uint64_t total = 0;
  gnio_test::to_host(&total, c.local(counter), 8);
  EXPECT_EQ(total, static_cast<std::uint64_t>(n) * (n + 1) / 2);
  c.bootstrap().barrier();
  c.free_device(src);
  c.free_device(got);
  c.free(counter);
  c.free(flag);
  c.free(ps_dst);
  c.free(put_dst);
}

TEST(StreamRma, BadPeerIsInvalidArgumentWithNoEffect) {
  gnio::Comm& c = comm();
  SymPtr<std::uint64_t> w = c.alloc<std::uint64_t>(1);
  std::uint64_t v = 1;
  for (int bad : {-1, c.size()}) {
    EXPECT_THROW(gnio::put_on_stream(c, w.cast<char>(), &v, 8, bad, stream()), gnio::Error);
    EXPECT_THROW(gnio::signal_on_stream(c, w, 1, SignalOp::Add, bad, stream()), gnio::Error);
  }
  c.synchronize(stream());
  c.check();  // nothing was queued, nothing failed
  c.bootstrap().barrier();
  c.free(w);
}

}  // namespace stream_rma_test
