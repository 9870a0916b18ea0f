// gnio-perf msg: two-sided messages (gnio::Channels) between 2 ranks beside the one-sided
// operations they are made of, same buffers, same run:
//
//   gnio-run -n 2 [--nodes 2] -- gnio-perf msg [-b 8] [-e 64M] [-f 4] [--mode lat,bw,rate]
//
//  * lat   one way = ping-pong time / 2 / iterations: rank 0 sends a message of the size, rank 1
//          receives it and sends one back (recv + send, a block each turn); beside it the same
//          ping-pong with put_signal into a heap buffer and wait_signal ("put_signal + wait").
//          ratio = msg / put_signal (the bar: <= 1.2 up to 64 KiB).
//  * bw    rank 0 sends iterations messages of the size, rank 1 receives each into its buffer
//          and acknowledges the last; beside it put_nbi of the same bytes into a heap buffer,
//          quiet and a signal, acknowledged the same way. GB/s = bytes x iterations / time;
//          ratio = msg GB/s / put GB/s (bar: >= 0.9 for large messages).
//  * rate  --channels blocks on each side, each on its own tag, 8-byte messages: messages per
//          second over all channels.
// time: rank 0's kernel (CUDA events on GPUs, a steady clock on the host backend), median of
// --reps kernels after one untimed. Every received message is checked (size and bytes) in the
// last repetition of each point; #wrong counts the bad ones.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/channel.hpp"
#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"
#include "gnio/stream.hpp"
#include "harness/driver.hpp"
#include "harness/event_timer.hpp"
#include "harness/report.hpp"
#include "msg_gnio_options.hpp"
#include "run_info_gnio.hpp"

namespace gnio::perf {
namespace {

enum class Mode { Lat, Bw, Rate };

GNIO_HD_INLINE std::uint8_t msg_byte(int rank, std::uint64_t i, std::uint32_t k) {
  return static_cast<std::uint8_t>((i * 131u + static_cast<std::uint64_t>(k) * 7u +
                                    static_cast<std::uint64_t>(rank) * 29u + 1u) %
                                       251u +
                                   1u);
}

/// One side of one measurement. Block cooperation; `baseline` runs the one-sided version.
struct MsgKernel {
  DeviceChannels set;
  SymPtr<char> land;          // baseline's destination (the size) in every rank's heap
  SymPtr<std::uint64_t> sig;  // baseline's signal words [2]
  const char* src;
  char* dst;
  unsigned long long* wrong;  // messages with a wrong size or bytes (checked ones)
  std::uint64_t bytes;
  std::uint64_t seq;  // signal values run on from here (they only grow)
  std::uint32_t iters;
  Mode mode;
  bool baseline;
  bool check;
  GNIO_HD_INLINE void operator()() const {
    const Block g;
    const DeviceComm& dc = set.comm;
    const int me = dc.rank(), peer = 1 - me;
    if (mode == Mode::Rate) {
      const Channel ch = set.channel(peer, static_cast<int>(dev::block()));
      for (std::uint32_t i = 0; i < iters; ++i) {
        if (me == 0) {
          if (send<Block>(ch, src + 8 * dev::block(), 8) != Status::Ok) return;
        } else {
          const Received r = recv<Block>(ch, dst + 8 * dev::block(), 8);
          if (r.status != Status::Ok) return;
          if (check && g.leader() && r.bytes != 8)
            dev::atomic_fetch_add(wrong, 1ull, dev::Order::Relaxed);
        }
      }
      // The sender's time ends when the receiver has all: its acknowledgement.
      const Channel ack = set.channel(peer, static_cast<int>(dev::block()));
      if (me == 1)
        (void)send<Block>(ack, src, 0);
      else
        (void)recv<Block>(ack, dst, 0);
      return;
    }
    const Channel ch = set.channel(peer, 0);
    auto got = [&](std::size_t n) {  // checks a received message (every member its share)
      if (!check) return;
      unsigned long long bad = n != bytes;
      for (std::uint64_t i = g.rank(); !bad && i < bytes; i += g.size())
        bad = static_cast<std::uint8_t>(dst[i]) != msg_byte(peer, i, 0);
      if (g.any(bad != 0) && g.leader()) dev::atomic_fetch_add(wrong, 1ull, dev::Order::Relaxed);
    };
    if (mode == Mode::Lat) {
      for (std::uint32_t i = 0; i < iters; ++i) {
        const std::uint64_t v = seq + i + 1;
        const bool first = me == 0;
        if (baseline) {
          if (first) dc.put_signal<Block>(land, src, bytes, sig + 0, v, SignalOp::Set, peer);
          if (dc.wait_signal<Block>(sig + (first ? 1 : 0), Cmp::Ge, v) != Status::Ok) return;
          if (!first) dc.put_signal<Block>(land, src, bytes, sig + 1, v, SignalOp::Set, peer);
        } else {
          if (first && send<Block>(ch, src, bytes) != Status::Ok) return;
          const Received r = recv<Block>(ch, dst, bytes);
          if (r.status != Status::Ok) return;
          if (i + 1 == iters) got(r.bytes);
          if (!first && send<Block>(ch, src, bytes) != Status::Ok) return;
        }
      }
      return;
    }
    // Bandwidth.
    if (baseline) {
      if (me == 0) {
        for (std::uint32_t i = 0; i < iters; ++i) dc.put_nbi<Block>(land, src, bytes, peer);
        if (g.leader()) {
          dc.quiet();
          dc.signal(sig + 0, seq + 1, SignalOp::Set, peer);
        }
        (void)dc.wait_signal<Block>(sig + 1, Cmp::Ge, seq + 1);
      } else {
        (void)dc.wait_signal<Block>(sig + 0, Cmp::Ge, seq + 1);
        if (g.leader()) dc.signal(sig + 1, seq + 1, SignalOp::Set, peer);
      }
      return;
    }
    if (me == 0) {
      for (std::uint32_t i = 0; i < iters; ++i)
        if (send<Block>(ch, src, bytes) != Status::Ok) return;
      (void)recv<Block>(ch, dst, 0);  // rank 1's acknowledgement
    } else {
      for (std::uint32_t i = 0; i < iters; ++i) {
        const Received r = recv<Block>(ch, dst, bytes);
        if (r.status != Status::Ok) return;
        if (i + 1 == iters) got(r.bytes);
      }
      (void)send<Block>(ch, src, 0);
    }
  }
};

class MsgBench {
 public:
  MsgBench(CommonOptions& common, const MsgOptions& opts)
      : common_(common), opts_(opts), comm_(Comm::from_env()), stream_(comm_) {
    gpu_ = comm_.backend() == Backend::Cuda;
    if (gpu_) timer_ = std::make_unique<EventTimer>(stream_.cuda());
    if (comm_.size() != 2)
      throw UsageError{"msg runs on exactly 2 ranks (gnio-run -n 2), not " +
                       std::to_string(comm_.size())};
    min_ = common_.min_bytes.value_or(8);
    max_ = common_.max_bytes.value_or(gpu_ ? (common_.quick ? 1 << 20 : 64 << 20)
                                           : (common_.quick ? 64 << 10 : 1 << 20));
    factor_ = common_.factor.value_or(8);
    iters_ = common_.iters.value_or(gpu_ ? (common_.quick ? 50 : 200) : (common_.quick ? 10 : 50));
    reps_ = opts_.reps ? opts_.reps : (common_.quick ? 3 : 5);
    channels_ = opts_.channels ? opts_.channels : gpu_ ? 32 : 2;
    slot_ = opts_.slot ? opts_.slot : gpu_ ? (1 << 20) : (256 << 10);
    threads_ = gpu_ ? 256 : 1;
  }

  int run() {
    Channels set(comm_, {.tags = static_cast<int>(channels_),
                         .depth = opts_.depth,
                         .max_message = slot_,
                         .ll_max = opts_.ll_max});
    land_ = comm_.alloc_bytes(max_);
    sig_ = comm_.alloc<std::uint64_t>(2);
    comm_.fill(comm_.local(sig_), 0, 2 * sizeof(std::uint64_t), stream_);
    src_ = static_cast<char*>(comm_.alloc_device(std::max<std::uint64_t>(max_, 8 * channels_)));
    dst_ = static_cast<char*>(comm_.alloc_device(std::max<std::uint64_t>(max_, 8 * channels_)));
    wrong_ = static_cast<unsigned long long*>(comm_.alloc_device(sizeof(unsigned long long)));
    std::vector<std::uint8_t> pattern(max_);
    for (std::uint64_t i = 0; i < max_; ++i) pattern[i] = msg_byte(comm_.rank(), i, 0);
    comm_.copy(src_, pattern.data(), max_, stream_);
    comm_.fill(wrong_, 0, sizeof(unsigned long long), stream_);
    comm_.synchronize(stream_);
    comm_.bootstrap().barrier();
    set_ = set.device_handle();
    set_.comm = comm_.device_handle();  // after the allocations
    route_proxy_ = set_.comm.route(1 - comm_.rank()) == Route::Proxy;

    if (comm_.rank() == 0) {
      std::printf(
          "# gnio-perf msg: 2 ranks over %s, %s backend, %s; channels of %u slots of %s "
          "(packets up to %s); blocks of %u threads; median of %u kernels\n",
          route_proxy_ ? "the proxy transport" : "p2p", to_string(comm_.backend()),
          comm_.device_description().c_str(), opts_.depth, format_size(slot_).c_str(),
          format_size(set_.ll_max).c_str(), threads_, reps_);
      std::printf(
          "#  mode       size   iters     msg(us)  onesided(us)    msg GB/s  onesided GB/s"
          "   ratio  #wrong\n");
    }
    std::vector<Row> rows;
    std::uint64_t total_wrong = 0;
    for (std::uint64_t bytes = min_; bytes <= max_; bytes *= factor_) {
      if (opts_.lat) total_wrong += point(Mode::Lat, bytes, rows);
      if (opts_.bw) total_wrong += point(Mode::Bw, bytes, rows);
      if (bytes > max_ / factor_) break;
    }
    if (opts_.rate) total_wrong += point(Mode::Rate, 8, rows);
    if (comm_.rank() == 0 && !common_.json_path.empty()) {
      RunInfo info = gnio_run_info(comm_, "msg", common_.command_line);
      info.timing = "eager";
      info.settings = {{"depth", std::to_string(opts_.depth)},
                       {"slot_bytes", std::to_string(slot_)},
                       {"ll_max", std::to_string(set_.ll_max)},
                       {"channels", std::to_string(channels_)},
                       {"threads_per_block", std::to_string(threads_)},
                       {"route", route_proxy_ ? "proxy" : "p2p"}};
      info.definitions = {
          {"msg lat", "one way: ping-pong of send + recv between 2 ranks / 2 / iterations"},
          {"put_signal lat", "one way: ping-pong of put_signal + wait_signal / 2 / iterations"},
          {"msg bw", "iterations messages of the size sent and received, bytes / time"},
          {"put bw", "iterations put_nbi of the size, quiet, signal, bytes / time"},
          {"msg rate", "8-byte messages per second over all channels"}};
      write_json(common_.json_path, info, rows);
    }
    comm_.free_device(src_);
    comm_.free_device(dst_);
    comm_.free_device(wrong_);
    comm_.free(sig_);
    comm_.free_bytes(land_);
    if (total_wrong && comm_.rank() == 0)
      std::fprintf(stderr, "gnio-perf msg: %llu wrong messages\n",
                   static_cast<unsigned long long>(total_wrong));
    return total_wrong ? kExitWrongData : 0;
  }

 private:
  /// Times one kernel pair; returns rank 0's microseconds.
  double time_once(const MsgKernel& k, unsigned grid) {
    comm_.bootstrap().barrier();
    const auto host_start = std::chrono::steady_clock::now();
    if (timer_ && comm_.rank() == 0) timer_->start();
    gnio::launch(stream_, {.grid = grid, .block = threads_}, k);
    if (timer_ && comm_.rank() == 0) timer_->stop();
    comm_.synchronize(stream_);
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start)
            .count();
    if (timer_ && comm_.rank() == 0) us = timer_->elapsed_us();
    double all[2] = {0, 0};
    all[comm_.rank()] = us;
    comm_.bootstrap().allgather(all, sizeof(double));
    return all[0];
  }

  std::uint64_t point(Mode mode, std::uint64_t bytes, std::vector<Row>& rows) {
    std::uint32_t iters = iters_;
    if (mode == Mode::Bw) {
      const std::uint64_t budget = gpu_ ? (std::uint64_t{1} << 30) : (std::uint64_t{16} << 20);
      iters = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(budget / bytes, 2, iters_ * 4));
    } else if (bytes >= (1 << 20)) {
      iters = std::max<std::uint32_t>(2, iters_ / 16);
    }
    const unsigned grid = mode == Mode::Rate ? channels_ : 1;
    std::vector<double> msg_us, base_us;
    for (unsigned rep = 0; rep <= reps_; ++rep) {  // rep 0 warms up
      const bool last = rep == reps_;
      MsgKernel k{set_, land_, sig_, src_, dst_, wrong_, bytes, seq_, iters, mode, false, last};
      const double m = time_once(k, grid);
      if (rep > 0) msg_us.push_back(m);
      if (mode == Mode::Rate) continue;
      k.baseline = true;
      k.check = false;
      const double b = time_once(k, grid);
      seq_ += iters + 1;
      if (rep > 0) base_us.push_back(b);
    }
    unsigned long long wrong = 0;
    comm_.copy(&wrong, wrong_, sizeof(wrong), stream_);
    comm_.fill(wrong_, 0, sizeof(unsigned long long), stream_);
    comm_.synchronize(stream_);
    std::uint64_t both[2] = {0, 0};
    both[comm_.rank()] = wrong;
    comm_.bootstrap().allgather(both, sizeof(std::uint64_t));
    wrong = both[0] + both[1];
    const Stats ms = stats_of(msg_us);
    if (comm_.rank() == 0) {
      const double per = mode == Mode::Lat ? 2.0 * iters : iters;
      Row r;
      r.op = mode == Mode::Lat ? "msg_lat" : mode == Mode::Bw ? "msg_bw" : "msg_rate";
      r.scope = "block";
      r.mode = mode == Mode::Lat ? "lat" : mode == Mode::Bw ? "bw" : "rate";
      r.bytes = bytes;
      r.iters = iters;
      r.median_us = ms.median / per;
      r.min_us = ms.min / per;
      r.max_us = ms.max / per;
      r.gbps = static_cast<double>(bytes) * iters / ms.median / 1e3;
      r.wrong = wrong;
      if (mode == Mode::Rate) {
        const double rate = static_cast<double>(channels_) * iters / ms.median;  // M msgs/s
        std::printf(
            "%7s %10s %7u %11.2f %13s %11s %14s %7s %7llu   %.3f M messages/s over %u "
            "channels\n",
            "rate", format_size(bytes).c_str(), iters, ms.median / iters, "-", "-", "-", "-",
            static_cast<unsigned long long>(wrong), rate, channels_);
        r.gbps = rate * 8e-3;
        rows.push_back(r);
        return wrong;
      }
      const Stats bs = stats_of(base_us);
      const double msg_t = ms.median / per, base_t = bs.median / per;
      const double msg_gbps = static_cast<double>(bytes) * iters / ms.median / 1e3;
      const double base_gbps = static_cast<double>(bytes) * iters / bs.median / 1e3;
      const double ratio = mode == Mode::Lat ? msg_t / base_t : msg_gbps / base_gbps;
      std::printf("%7s %10s %7u %11.2f %13.2f %11.3f %14.3f %7.2f %7llu\n", r.mode.c_str(),
                  format_size(bytes).c_str(), iters, msg_t, base_t, msg_gbps, base_gbps, ratio,
                  static_cast<unsigned long long>(wrong));
      std::fflush(stdout);
      rows.push_back(r);
      Row b = r;
      b.op = mode == Mode::Lat ? "put_signal_lat" : "put_bw";
      b.median_us = base_t;
      b.min_us = bs.min / per;
      b.max_us = bs.max / per;
      b.gbps = base_gbps;
      b.wrong = 0;
      rows.push_back(b);
    }
    return wrong;
  }

  CommonOptions& common_;
  MsgOptions opts_;
  Comm comm_;
  Stream stream_;
  bool gpu_ = false, route_proxy_ = false;
  std::unique_ptr<EventTimer> timer_;
  std::uint64_t min_ = 8, max_ = 0, factor_ = 8, slot_ = 0, seq_ = 0;
  std::uint32_t iters_ = 0;
  unsigned reps_ = 0, channels_ = 0, threads_ = 1;
  DeviceChannels set_;
  SymPtr<char> land_;
  SymPtr<std::uint64_t> sig_;
  char* src_ = nullptr;
  char* dst_ = nullptr;
  unsigned long long* wrong_ = nullptr;
};

int run_msg(CommonOptions& common, const MsgOptions& opts) {
  MsgBench bench(common, opts);
  return bench.run();
}

const SubcommandRegistrar kRegisterMsg(make_subcommand<MsgOptions>(
    "msg",
    "two-sided messages (send/recv on channels) beside put_signal and put: latency, bandwidth, "
    "message rate",
    add_msg_options, run_msg));

}  // namespace
}  // namespace gnio::perf
