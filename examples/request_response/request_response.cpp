// A request/response server in a kernel: rank 0's kernel serves every other rank's kernel over
// two-sided messages (gnio::Channels). A client sends requests of its chosen size (a list of
// integers) on tag 0; the server polls every client with try_recv, answers each request with the
// sum and the sum of squares of its integers on tag 1, and stops when every client said goodbye
// (an empty message). No CPU in the loop: the host only starts the kernels and checks the answers.
//
//   gnio-run -n 3 ./request_response [requests per client]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gnio/channel.hpp"
#include "gnio/comm.hpp"
#include "gnio/launch.hpp"

namespace {

constexpr int kRequestTag = 0, kReplyTag = 1;
constexpr std::size_t kMaxInts = 1024;  // a request holds 1..kMaxInts integers

struct Reply {
  std::int64_t sum;
  std::int64_t squares;
};

/// Request k of `client`: its length and integers (both sides compute them).
GNIO_HD_INLINE std::size_t request_ints(int client, int k) {
  return 1 + static_cast<std::size_t>(client * 131 + k * 17) % kMaxInts;
}
GNIO_HD_INLINE std::int32_t request_value(int client, int k, std::size_t i) {
  return static_cast<std::int32_t>((client * 7 + k * 13 + static_cast<int>(i) * 3) % 2001) - 1000;
}

}  // namespace

int main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 100;
  gnio::Comm comm = gnio::Comm::from_env();
  if (comm.size() < 2 || requests < 1) {
    std::fprintf(
        stderr,
        "request_response needs 2 or more ranks and requests >= 1: gnio-run -n 3 %s [requests]\n",
        argv[0]);
    return 2;
  }
  gnio::Stream stream(comm);
  // Two tags per pair; a slot holds the largest request.
  gnio::Channels channels(comm, {.tags = 2, .depth = 4, .max_message = kMaxInts * 4});
  const int me = comm.rank(), ranks = comm.size();
  // The server's buffers (per client) and a client's request and replies, in device memory.
  auto* buf =
      static_cast<std::int32_t*>(comm.alloc_device(ranks * kMaxInts * sizeof(std::int32_t)));
  auto* replies = static_cast<Reply*>(comm.alloc_device(requests * sizeof(Reply)));
  auto* served = static_cast<unsigned long long*>(comm.alloc_device(sizeof(unsigned long long)));
  comm.fill(served, 0, sizeof(unsigned long long), stream);

  const gnio::DeviceChannels set = channels.device_handle();
  gnio::launch(stream, {.grid = 1, .block = 128, .shared_bytes = sizeof(Reply)}, [=] GNIO_HD() {
    const gnio::Block block;
    if (me == 0) {
      // Server: poll the clients in turn until each has said goodbye.
      int open = ranks - 1;
      unsigned long long count = 0;
      Reply& answer = *static_cast<Reply*>(gnio::dev::shared_memory());  // the block's answer
      while (open > 0) {
        for (int c = 1; c < ranks; ++c) {
          std::int32_t* in = buf + c * kMaxInts;
          const gnio::Received r =
              gnio::try_recv<gnio::Block>(set.channel(c, kRequestTag), in, kMaxInts * 4);
          if (r.status != gnio::Status::Ok) return;  // Comm::synchronize reports it
          if (!r.arrived) continue;
          if (r.bytes == 0) {  // goodbye
            --open;
            continue;
          }
          if (block.leader()) {
            std::int64_t sum = 0, squares = 0;
            for (std::size_t i = 0; i < r.bytes / 4; ++i) {
              sum += in[i];
              squares += static_cast<std::int64_t>(in[i]) * in[i];
            }
            answer = Reply{sum, squares};
          }
          block.sync();
          if (gnio::send<gnio::Block>(set.channel(c, kReplyTag), &answer, sizeof(Reply)) !=
              gnio::Status::Ok)
            return;
          ++count;
        }
      }
      if (block.leader()) *served = count;
      return;
    }
    // Client: requests one after another, each reply awaited.
    std::int32_t* req = buf + me * kMaxInts;
    for (int k = 0; k < requests; ++k) {
      const std::size_t n = request_ints(me, k);
      for (std::size_t i = block.rank(); i < n; i += block.size()) req[i] = request_value(me, k, i);
      if (gnio::send<gnio::Block>(set.channel(0, kRequestTag), req, n * 4) != gnio::Status::Ok)
        return;
      const gnio::Received r =
          gnio::recv<gnio::Block>(set.channel(0, kReplyTag), replies + k, sizeof(Reply));
      if (r.status != gnio::Status::Ok) return;
    }
    (void)gnio::send<gnio::Block>(set.channel(0, kRequestTag), req, 0);  // goodbye
  });
  comm.synchronize(stream);  // a stalled peer ends as a Timeout naming the wait

  int failures = 0;
  if (me == 0) {
    unsigned long long count = 0;
    comm.copy(&count, served, sizeof(count), stream);
    comm.synchronize(stream);
    const unsigned long long expected = static_cast<unsigned long long>(ranks - 1) * requests;
    std::printf("server: %llu requests answered (expected %llu)\n", count, expected);
    failures += count != expected;
  } else {
    std::vector<Reply> got(requests);
    comm.copy(got.data(), replies, requests * sizeof(Reply), stream);
    comm.synchronize(stream);
    for (int k = 0; k < requests; ++k) {
      std::int64_t sum = 0, squares = 0;
      for (std::size_t i = 0; i < request_ints(me, k); ++i) {
        sum += request_value(me, k, i);
        squares += static_cast<std::int64_t>(request_value(me, k, i)) * request_value(me, k, i);
      }
      failures += got[k].sum != sum || got[k].squares != squares;
    }
    std::printf("client %d: %d replies, %d wrong\n", me, requests, failures);
  }
  comm.free_device(buf);
  comm.free_device(replies);
  comm.free_device(served);
  return failures ? 1 : 0;
}
