// gnio-perf coll's benchmark: the plan (settings resolved from the options and the backend's
// defaults), what a point measures (Side, Point), and CollBench, which checks and times every
// point. Its members are defined in coll_gnio_bench.cpp (the plan and the run) and
// coll_gnio_report.cpp (the tables, the JSON rows and the run's description).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coll_gnio_options.hpp"
#include "coll_nccl.hpp"
#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/config.hpp"
#include "gnio/stream.hpp"
#include "harness/coll_data.hpp"
#include "harness/driver.hpp"
#include "harness/event_timer.hpp"
#include "harness/report.hpp"

namespace gnio::perf {

using gnio_bench::CollCall;

/// Settings resolved from the options and the backend's defaults.
struct Plan {
  std::uint64_t min_bytes, max_bytes, factor;
  std::uint32_t iters, warmup, graph;
  unsigned reps;
  std::uint64_t budget;  ///< bytes one measurement may move (size x calls)
  std::uint64_t buffer_bytes;
  bool on_gpu;
};

/// What one side (gnio or NCCL, out of place or in place) of one point measured.
struct Side {
  bool ran = false;
  bool checked = false;
  std::uint32_t iters = 0;
  double time_us = 0, min_us = 0, max_us = 0;
  std::uint64_t wrong = 0;
};

/// One row: a size of one table, both placements, gnio and (optionally) NCCL.
struct Point {
  std::uint64_t bytes = 0;
  std::size_t count = 0;
  std::string algo;
  Side gnio[2], nccl[2];  // [in_place]
};

bool gathered(CollKind k);

class CollBench {
 public:
  CollBench(const CommonOptions& common, const CollOptions& opts)
      : common_(common), opts_(opts), comm_(Comm::from_env()), stream_(comm_) {}

  ~CollBench() {
    nccl_.reset();  // before the buffers and the communicator it runs on
    try {
      if (opts_.private_buffers) {
        for (char* p : priv_)
          if (p) comm_.free_device(p);
      }
    } catch (...) {
    }
  }

  int run();

 private:
  void resolve();
  void allocate();
  void print_header() const;
  void print_table_header(CollKind k, DataType t, std::optional<RedOp> op) const;
  void print_row(CollKind k, DataType t, std::optional<RedOp> op, const Point& p) const;
  Point run_point(CollKind k, DataType t, RedOp op, std::size_t count);
  Side run_side(CollCall& c, bool nccl);
  void enqueue(const CollCall& c, const void* send, void* recv, bool nccl);
  std::uint64_t check_output(const CollCall& c, const std::vector<std::uint8_t>& want,
                             bool whole_buffer);
  JsonRow row_json(CollKind k, DataType t, std::optional<RedOp> op, const Point& p,
                   int in_place) const;
  RunInfo run_info() const;
  /// The algorithm spec in force: --algo's, else GNIO_ALGO's, else "auto".
  std::string algo_label() const {
    if (!opts_.algo.empty()) return opts_.algo;
    return config_is_set("GNIO_ALGO") ? "GNIO_ALGO=" + config_text("GNIO_ALGO") : "auto";
  }
  std::uint64_t sum_over_ranks(std::uint64_t v);

  const CommonOptions& common_;
  const CollOptions& opts_;
  Comm comm_;
  Stream stream_;
  std::unique_ptr<EventTimer> timer_;
  std::unique_ptr<NcclColl> nccl_;
  Plan plan_{};
  SymPtr<char> sym_[2];
  char* priv_[2] = {};
  char* buf_[2] = {};  // [0] send (out of place), [1] recv or the in-place buffer
  std::vector<JsonRow> rows_json_;
  std::uint64_t wrong_ = 0, nccl_wrong_ = 0, unchecked_ = 0;
};

}  // namespace gnio::perf
