// gnio-perf coll's command line (coll_gnio_options.hpp): its options and
// the notes of its help, for the driver to parse.
#include "coll_gnio_options.hpp"

#include <string>
#include <vector>

#include "harness/cli_options.hpp"
#include "harness/coll_data.hpp"

namespace gnio::perf {
namespace {

const std::vector<Named<CollKind>>& coll_names() {
  static const std::vector<Named<CollKind>> names = [] {
    std::vector<Named<CollKind>> v;
    std::vector<CollKind> all;
    for (int i = 0; i < kCollKindCount; ++i) {
      const auto k = static_cast<CollKind>(i);
      v.push_back({to_string(k), {k}});
      all.push_back(k);
    }
    v.push_back({"all", all});
    return v;
  }();
  return names;
}

const std::vector<Named<DataType>>& type_names() {
  // gnio's names, then nccl-tests' (-d float, half, ...).
  static const std::vector<Named<DataType>> names = [] {
    std::vector<Named<DataType>> v;
    for (DataType t : gnio_bench::kAllTypes) v.push_back({to_string(t), {t}});
    v.insert(v.end(), {{"float", {DataType::F32}},
                       {"half", {DataType::F16}},
                       {"bfloat16", {DataType::BF16}},
                       {"double", {DataType::F64}},
                       {"int32", {DataType::I32}},
                       {"int", {DataType::I32}},
                       {"int64", {DataType::I64}},
                       {"uint8", {DataType::U8}},
                       {"fp8_e4m3", {DataType::F8E4M3}},
                       {"fp8_e5m2", {DataType::F8E5M2}}});
    v.push_back({"all", {std::begin(gnio_bench::kAllTypes), std::end(gnio_bench::kAllTypes)}});
    return v;
  }();
  return names;
}

const std::vector<Named<RedOp>>& op_names() {
  static const std::vector<Named<RedOp>> names = [] {
    std::vector<Named<RedOp>> v;
    std::vector<RedOp> all;
    for (int i = 0; i < kRedOpCount; ++i) {
      const auto op = static_cast<RedOp>(i);
      v.push_back({to_string(op), {op}});
      all.push_back(op);
    }
    v.insert(v.end(),
             {{"band", {RedOp::BitAnd}}, {"bor", {RedOp::BitOr}}, {"bxor", {RedOp::BitXor}}});
    v.push_back({"all", all});
    return v;
  }();
  return names;
}

/// Checks the words of an --algo spec (auto|ll|oneshot|twoshot|ring, or collective:algorithm),
/// so that a typo is a usage error before any communicator exists. Whether a collective has the
/// algorithm it is paired with is coll_set_algorithm's to say.
void check_algo_spec(const std::string& spec) {
  std::vector<Named<int>> algos;
  for (int i = 0; i < kCollAlgoCount; ++i)
    algos.push_back({to_string(static_cast<CollAlgo>(i)), {i}});
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = spec.find(',', pos);
    const std::string word =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t colon = word.find(':');
    if (colon != std::string::npos) {
      std::vector<Named<int>> colls;
      for (int i = 0; i < kCollKindCount; ++i)
        colls.push_back({to_string(static_cast<CollKind>(i)), {i}});
      parse_names(word.substr(0, colon), "--algo (collective)", colls);
      parse_names(word.substr(colon + 1), "--algo", algos);
    } else {
      parse_names(word, "--algo", algos);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

}  // namespace

void add_coll_options(OptionList& list, CollOptions& o) {
  o.colls = parse_names<CollKind>("all", "--coll", coll_names());
  o.types = {DataType::F32};
  o.ops = {RedOp::Sum};
  add_names_option(list, "--coll", "--coll", o.colls, coll_names(),
                   "allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall,\n"
                   "alltoallv, all [all]");
  add_names_option(list, "-d,--datatype", "-d (type)", o.types, type_names(),
                   "element types: f32 f16 bf16 f64 i32 i64 u8 f8e4m3 f8e5m2 (or nccl-tests'\n"
                   "float half bfloat16 double int32 int64 uint8), all [f32]");
  add_names_option(list, "-o,--op", "-o (operator)", o.ops, op_names(),
                   "operators: sum prod min max and or xor, all [sum]; bitwise ones run on\n"
                   "the integer types only");
  add_count_option(list, "-c,--check", "-c (check)", o.check, 0, 1,
                   "check every element of every result once per point [1]")
      .value_name("0|1");
  add_count_option(list, "-G,--cudagraph", "-G (calls per graph launch)", o.graph, 0, 1u << 20,
                   "calls captured per CUDA graph launch; 0 = eager (calls enqueued one by\n"
                   "one) [GPU: 20 (quick: 10); host backend: 0, the only choice]");
  list.add(
      "--algo",
      [&o](const std::string& v) {
        check_algo_spec(v);
        o.algo = v;
      },
      "auto, ll, oneshot, twoshot, ring, or a comma list of them and of\n"
      "collective:algorithm pairs (as GNIO_ALGO) [GNIO_ALGO, else auto]",
      "SPEC");
  add_count_option(list, "--inplace", "--inplace", o.inplace, 0, 2,
                   "0 out of place, 1 in place, 2 both [2] (alltoall(v): out of place only)");
  add_count_option(list, "--root", "--root", o.root, 0, 1u << 20,
                   "root of broadcast and reduce [0]")
      .value_name("R");
  add_count_option(list, "--reps", "--reps", o.reps, 1, 1000,
                   "timed measurements per point; time is their median [5]");
  add_choice_option(list, "--mem", "--mem", o.private_buffers, {{"sym", {false}}, {"priv", {true}}},
                    "buffers in the symmetric heap (zero-copy) or private device memory\n"
                    "(staged through gnio's symmetric staging) [sym]");
  list.add_flag("--vs-nccl", o.vs_nccl,
                "also time NCCL (libnccl loaded at run time) on the same buffers: adds\n"
                "nccl(us) and ratio = nccl time / gnio time (> 1: gnio faster); GPUs only");
  list.footer =
      "LIST is comma-separated. Defaults: GPU -b 8 -e 256M -f 2 -n 20 -w 5; host backend\n"
      "-b 8 -e 256K -f 4 -n 5 -w 1. --quick: GPU -e 16M -f 16 -n 10 -w 2; host backend -b 64\n"
      "-e 16K -f 256 -n 2 -w 1 --reps 2. Large sizes run fewer calls per measurement (at most\n"
      "4 GiB moved on a GPU, 16 MiB on the host backend; at least 1 call).";
}

}  // namespace gnio::perf
