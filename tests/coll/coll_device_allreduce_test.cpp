// In-kernel allreduce with the algorithm chosen at run time (a CollAlgo value: the kernel compiles
// every algorithm), called repeatedly by one Thread, Warp or Block group while another block of
// the kernel runs alongside.
#include <vector>

#include "coll/coll_device_util.hpp"

namespace coll_device_test {
namespace {

using coll_test::input_value;
using gnio::CollAlgo;
using gnio::CollComm;
using gnio::Status;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::stream;

template <class Coop>
void allreduce_kernel(CollComm cc, float* buf, std::size_t count, CollAlgo algo, int repeats,
                      unsigned threads, std::uint32_t* bad) {
  gnio::launch(stream(), {.grid = 2, .block = threads}, [=] GNIO_HD() {
    if (gnio::dev::block() != 0) {
      // The other block only proves the kernel keeps running alongside; it touches nothing.
      return;
    }
    if constexpr (std::is_same_v<Coop, gnio::Thread>) {
      if (gnio::dev::thread() != 0) return;
    } else if constexpr (std::is_same_v<Coop, gnio::Warp>) {
      if (gnio::dev::warp() != 0) return;
    }
    std::uint32_t fails = 0;
    for (int k = 0; k < repeats; ++k)
      fails += cc.allreduce<Coop>(buf, buf, count, gnio::op::Sum{}, algo) != Status::Ok;
    if (Coop{}.leader()) gnio::dev::atomic_fetch_add(bad, fails, gnio::dev::Order::Relaxed);
  });
}

template <class Coop>
void check_repeated_allreduce(unsigned threads) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const std::size_t count = 3001;
  const int repeats = 3;
  SymPtr<float> buf = c.alloc<float>(count);
  auto* bad = static_cast<std::uint32_t*>(c.alloc_device(4));
  std::size_t wrong = 0;
  for (CollAlgo algo : algorithms()) {
    std::vector<float> in(count);
    for (std::size_t i = 0; i < count; ++i)
      in[i] = static_cast<float>(input_value(gnio::DataType::F32, gnio::RedOp::Sum, me, i));
    gnio_test::to_device(c.local(buf), in.data(), count * sizeof(float));
    std::uint32_t zero = 0;
    gnio_test::to_device(bad, &zero, 4);
    allreduce_kernel<Coop>(gnio::coll_comm(c, stream()), c.local(buf), count, algo, repeats,
                           threads, bad);
    c.synchronize(stream());
    std::uint32_t fails = 1;
    gnio_test::to_host(&fails, bad, 4);
    EXPECT_EQ(fails, 0u) << "algorithm " << gnio::to_string(algo);
    std::vector<float> got(count);
    gnio_test::to_host(got.data(), c.local(buf), count * sizeof(float));
    for (std::size_t i = 0; i < count; ++i) {
      double s = 0;
      for (int r = 0; r < n; ++r) s += input_value(gnio::DataType::F32, gnio::RedOp::Sum, r, i);
      for (int k = 1; k < repeats; ++k) s *= n;
      if (got[i] != static_cast<float>(s)) {
        if (wrong < 4)
          ADD_FAILURE() << gnio::to_string(algo) << " element " << i << ": " << got[i]
                        << " != " << s;
        ++wrong;
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  c.free_device(bad);
  c.free(buf);
}

TEST(CollDevice, AllReduceBlock) {
  check_repeated_allreduce<gnio::Block>(host() ? 8 : 256);
}
TEST(CollDevice, AllReduceWarp) {
  check_repeated_allreduce<gnio::Warp>(32);
}
TEST(CollDevice, AllReduceThread) {
  check_repeated_allreduce<gnio::Thread>(host() ? 2 : 64);
}

}  // namespace
}  // namespace coll_device_test
