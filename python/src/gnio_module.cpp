// gnio._gnio: the C++ side of the Python package (nanobind). It holds the communicator and turns
// DLPack arrays (NumPy on the host backend; torch/CuPy tensors on GPUs) into gnio calls; the
// Python layer (python/gnio/__init__.py) gives the public names, defaults and docstrings.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/error.hpp"
#include "gnio/stream_rma.hpp"
#include "gnio/version.hpp"

namespace nb = nanobind;

namespace {

/// An array argument: a DLPack array (NumPy, CuPy, torch, ...), or the description the Python
/// layer makes of a torch tensor, the tuple (tag, address, elements, DLPack type code, bits,
/// DLPack device type, contiguous): DLPack's conversion costs microseconds per tensor, more than
/// the whole call may add to a collective (docs/guide/python.md).
class Array {
 public:
  Array() = default;
  explicit Array(nb::ndarray<> a)
      : data_(a.data()), size_(a.size()), dtype_(a.dtype()), device_(a.device_type()) {
    contiguous_ = true;
    if (a.stride_ptr() != nullptr) {  // DLPack strides are in elements, row-major when dense
      std::int64_t expected = 1;
      for (std::size_t d = a.ndim(); d-- > 0;) {
        if (a.shape(d) != 1 && a.stride(d) != expected) contiguous_ = false;
        expected *= static_cast<std::int64_t>(a.shape(d));
      }
    }
    keep_ = std::move(a);
  }
  Array(std::uintptr_t address, std::size_t size, nb::dlpack::dtype dtype, int device,
        bool contiguous)
      : data_(reinterpret_cast<void*>(address)),
        size_(size),
        dtype_(dtype),
        device_(device),
        contiguous_(contiguous) {}

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t nbytes() const { return size_ * ((dtype_.bits + 7u) / 8u); }
  nb::dlpack::dtype dtype() const { return dtype_; }
  int device_type() const { return device_; }
  /// Laid out densely in row-major order.
  bool contiguous() const { return contiguous_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  nb::dlpack::dtype dtype_{};
  int device_ = 0;
  bool contiguous_ = true;
  nb::ndarray<> keep_;  // holds a DLPack array's memory for the call
};

/// The first element of a tensor description (_gnio._description_tag): a tuple that does not
/// start with it, whatever its contents, is never read as an address.
PyObject* description_tag = nullptr;

}  // namespace

namespace nanobind::detail {

/// Python -> Array: a 7-tuple that starts with description_tag is a torch tensor's description
/// (gnio/__init__.py's _arg); anything else goes through nanobind's DLPack import.
template <>
struct type_caster<Array> {
  NB_TYPE_CASTER(Array, const_name("array"))

  template <class Flags>  // uint8_t or uint32_t, by nanobind version
  bool from_python(handle src, Flags flags, cleanup_list* cleanup) noexcept {
    PyObject* t = src.ptr();
    if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 7 && PyTuple_GET_ITEM(t, 0) == description_tag) {
      const unsigned long long address = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 1));
      const unsigned long long size = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 2));
      const long code = PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
      const long bits = PyLong_AsLong(PyTuple_GET_ITEM(t, 4));
      const long device = PyLong_AsLong(PyTuple_GET_ITEM(t, 5));
      const int contiguous = PyObject_IsTrue(PyTuple_GET_ITEM(t, 6));
      if (PyErr_Occurred() || contiguous < 0 || code < 0 || code > 255 || bits <= 0 || bits > 255) {
        PyErr_Clear();
        return false;
      }
      nb::dlpack::dtype dtype{};
      dtype.code = static_cast<std::uint8_t>(code);
      dtype.bits = static_cast<std::uint8_t>(bits);
      dtype.lanes = 1;
      value = Array(static_cast<std::uintptr_t>(address), static_cast<std::size_t>(size), dtype,
                    static_cast<int>(device), contiguous != 0);
      return true;
    }
    make_caster<nb::ndarray<>> dlpack;
    if (!dlpack.from_python(src, flags, cleanup)) return false;
    value = Array(std::move(dlpack.value));
    return true;
  }
};

}  // namespace nanobind::detail

namespace {

using gnio::Error;
using gnio::ErrorClass;

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorClass::InvalidArgument, what);
}

/// The gnio DataType of a DLPack dtype, or InvalidArgument naming the ones gnio has.
gnio::DataType data_type(const Array& a, const char* what) {
  const nb::dlpack::dtype t = a.dtype();
  using Code = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    const auto code = static_cast<Code>(t.code);
    if (code == Code::Float && t.bits == 32) return gnio::DataType::F32;
    if (code == Code::Float && t.bits == 64) return gnio::DataType::F64;
    if (code == Code::Float && t.bits == 16) return gnio::DataType::F16;
    if (code == Code::Bfloat && t.bits == 16) return gnio::DataType::BF16;
    if (code == Code::Int && t.bits == 32) return gnio::DataType::I32;
    if (code == Code::Int && t.bits == 64) return gnio::DataType::I64;
    if (code == Code::UInt && t.bits == 8) return gnio::DataType::U8;
  }
  invalid(std::string(what) +
          ": element type not supported (gnio has float32, float64, float16, bfloat16, int32, "
          "int64, uint8)");
}

gnio::RedOp red_op(const std::string& op) {
  if (op == "sum") return gnio::RedOp::Sum;
  if (op == "prod") return gnio::RedOp::Prod;
  if (op == "min") return gnio::RedOp::Min;
  if (op == "max") return gnio::RedOp::Max;
  if (op == "band") return gnio::RedOp::BitAnd;
  if (op == "bor") return gnio::RedOp::BitOr;
  if (op == "bxor") return gnio::RedOp::BitXor;
  invalid("op '" + op + "' is not one of sum, prod, min, max, band, bor, bxor");
}

/// The stream argument of a call that names none (Python passes it when neither stream= nor a
/// torch CUDA tensor gives one): the call runs on the communicator's own stream and waits.
constexpr std::int64_t kNoStream = -1;

/// A communicator with its own stream, the symmetric buffers handed out and how many of them
/// Python still references.
class PyComm {
 public:
  explicit PyComm(gnio::Comm comm) : comm_(std::move(comm)), live_(std::make_shared<int>(0)) {
    stream_ = std::make_unique<gnio::Stream>(*comm_);
  }

  gnio::Comm& comm() {
    if (!comm_) invalid("the communicator is closed");
    return *comm_;
  }
  bool closed() const { return !comm_.has_value(); }

  /// Destroys the communicator (collective). Refused while Python holds symmetric buffers: their
  /// memory goes with it.
  void close() {
    if (!comm_) return;
    if (*live_ > 0)
      invalid("close: " + std::to_string(*live_) +
              " symmetric buffer(s) from empty()/zeros() are still referenced; their memory ends "
              "with the communicator: del them first");
    comm_->synchronize(*stream_);
    for (const Buffer& b : buffers_) comm_->free_bytes(b.at);
    buffers_.clear();
    stream_.reset();
    comm_.reset();
  }

  void abort() {
    if (comm_) comm_->abort();
  }

  /// Checks an array argument for a collective: on this rank's backend, dense, and returns its
  /// address and element count.
  void* address(const Array& a, const char* what) {
    const bool host = comm().backend() == gnio::Backend::Host;
    const int device = a.device_type();
    if (host && device != nb::device::cpu::value)
      invalid(std::string(what) + ": the host backend takes host arrays (NumPy), not device " +
              std::to_string(device) + " memory");
    if (!host && device != nb::device::cuda::value)
      invalid(std::string(what) + ": the cuda backend takes CUDA device arrays (torch, CuPy)");
    if (!a.contiguous()) invalid(std::string(what) + ": the array must be C-contiguous");
    return a.data();
  }

  /// The stream a call runs on: the given CUDA stream (an integer handle; 0 is CUDA's legacy
  /// default stream, torch's default), or, for kNoStream, this communicator's own stream, which
  /// the call then waits for (eager). The host backend has no CUDA streams: 0 means none there.
  template <class Call>
  void on_stream(std::int64_t stream, Call&& call) {
    gnio::Comm& c = comm();
    const bool host = c.backend() == gnio::Backend::Host;
    if (stream < kNoStream || (host && stream > 0))
      invalid(host ? "stream: the host backend has no CUDA streams (leave stream unset)"
                   : "stream: not a CUDA stream handle (" + std::to_string(stream) + ")");
    if (stream >= 0 && !host) {
      call(gnio::StreamRef(reinterpret_cast<CUstream_st*>(static_cast<std::uintptr_t>(stream))));
      return;
    }
    call(gnio::StreamRef(*stream_));
    c.synchronize(*stream_);
  }

  void all_reduce(const Array& x, const Array& out, const std::string& op, std::int64_t stream) {
    const gnio::DataType t = same_type(x, out, "all_reduce");
    if (out.size() != x.size()) invalid("all_reduce: out must have as many elements as x");
    const gnio::RedOp r = red_op(op);
    void* send = address(x, "all_reduce: x");
    void* recv = address(out, "all_reduce: out");
    on_stream(stream,
              [&](gnio::StreamRef s) { gnio::allreduce(comm(), send, recv, x.size(), t, r, s); });
  }

  void all_gather(const Array& x, const Array& out, std::int64_t stream) {
    const gnio::DataType t = same_type(x, out, "all_gather");
    if (out.size() != x.size() * static_cast<std::size_t>(comm().size()))
      invalid("all_gather: out must have size x size elements (" +
              std::to_string(x.size() * static_cast<std::size_t>(comm().size())) + "), not " +
              std::to_string(out.size()));
    void* send = address(x, "all_gather: x");
    void* recv = address(out, "all_gather: out");
    on_stream(stream,
              [&](gnio::StreamRef s) { gnio::allgather(comm(), send, recv, x.size(), t, s); });
  }

  void reduce_scatter(const Array& x, const Array& out, const std::string& op,
                      std::int64_t stream) {
    const gnio::DataType t = same_type(x, out, "reduce_scatter");
    if (x.size() != out.size() * static_cast<std::size_t>(comm().size()))
      invalid("reduce_scatter: x must have size x out elements (" +
              std::to_string(out.size() * static_cast<std::size_t>(comm().size())) + "), not " +
              std::to_string(x.size()));
    const gnio::RedOp r = red_op(op);
    void* send = address(x, "reduce_scatter: x");
    void* recv = address(out, "reduce_scatter: out");
    on_stream(stream, [&](gnio::StreamRef s) {
      gnio::reduce_scatter(comm(), send, recv, out.size(), t, r, s);
    });
  }

  void broadcast(const Array& x, int root, std::int64_t stream) {
    const gnio::DataType t = data_type(x, "broadcast");
    void* buf = address(x, "broadcast: x");
    on_stream(stream,
              [&](gnio::StreamRef s) { gnio::broadcast(comm(), buf, buf, x.size(), t, root, s); });
  }

  void reduce(const Array& x, const Array& out, int root, const std::string& op,
              std::int64_t stream) {
    const gnio::DataType t = same_type(x, out, "reduce");
    if (out.size() != x.size()) invalid("reduce: out must have as many elements as x");
    const gnio::RedOp r = red_op(op);
    void* send = address(x, "reduce: x");
    void* recv = address(out, "reduce: out");
    on_stream(stream, [&](gnio::StreamRef s) {
      gnio::reduce(comm(), send, recv, x.size(), t, r, root, s);
    });
  }

  void all_to_all(const Array& x, const Array& out, std::int64_t stream) {
    const gnio::DataType t = same_type(x, out, "all_to_all");
    const std::size_t n = static_cast<std::size_t>(comm().size());
    if (out.size() != x.size() || x.size() % n != 0)
      invalid("all_to_all: x and out must have the same number of elements, a multiple of size (" +
              std::to_string(n) + ")");
    void* send = address(x, "all_to_all: x");
    void* recv = address(out, "all_to_all: out");
    if (send == recv) invalid("all_to_all: out must not be x (the exchange is not in place)");
    on_stream(stream,
              [&](gnio::StreamRef s) { gnio::alltoall(comm(), send, recv, x.size() / n, t, s); });
  }

  void barrier() {
    comm().synchronize(*stream_);
    comm().bootstrap().barrier();
  }

  /// A symmetric buffer of `bytes` as a flat uint8 array over this rank's copy; the Python layer
  /// views it with the asked shape and dtype.
  nb::object empty(std::size_t bytes, bool zero) {
    gnio::Comm& c = comm();
    gnio::SymPtr<char> p = c.alloc_bytes(bytes == 0 ? 1 : bytes);
    buffers_.push_back({p, bytes});
    void* local = c.local_address(p);
    if (zero) {
      c.fill(local, 0, bytes, *stream_);
      c.synchronize(*stream_);
    }
    return wrap(local, bytes);
  }

  /// Rank `peer`'s copy of the symmetric buffer whose local copy starts at `local` (bytes long),
  /// or None when that peer's memory is not mapped here (another node).
  nb::object peer(std::uintptr_t local, std::size_t bytes, int peer_rank) {
    gnio::Comm& c = comm();
    std::uintptr_t base = 0;
    const Buffer* b = containing(local, &base);
    if (b == nullptr || base != local)
      invalid("peer: the buffer is not one of this communicator's empty()/zeros() buffers");
    void* there = c.peer_address(b->at, peer_rank);
    if (there == nullptr) return nb::none();
    return wrap(there, bytes);
  }

  /// The gnio::SymPtr naming `a`, (a view of) a buffer from empty(), as its 16 bytes: custom
  /// kernels take it by value (memcpy into a gnio::SymPtr<T>).
  nb::bytes sym_ptr(const Array& a) {
    const gnio::SymPtr<char> p = symmetric(a, a.nbytes(), "sym_ptr");
    static_assert(sizeof(p) == 16, "SymPtr's layout is part of the Python API");
    return nb::bytes(reinterpret_cast<const char*>(&p), sizeof(p));
  }

  // One-sided operations started here (gnio/stream_rma.hpp). `dst`/`src`/`sig` that name a peer's
  // memory are (views of) this communicator's symmetric buffers; the other side is any array.
  void put(const Array& dst, const Array& src, int peer, std::int64_t stream) {
    const gnio::SymPtr<char> to = symmetric(dst, src.nbytes(), "put: dst");
    const void* from = address(src, "put: src");
    on_stream(stream, [&](gnio::StreamRef s) {
      gnio::put_on_stream(comm(), to, from, src.nbytes(), peer, s);
    });
  }

  void get(const Array& dst, const Array& src, int peer, std::int64_t stream) {
    const gnio::SymPtr<char> from = symmetric(src, dst.nbytes(), "get: src");
    void* to = address(dst, "get: dst");
    on_stream(stream, [&](gnio::StreamRef s) {
      gnio::get_on_stream(comm(), to, from, dst.nbytes(), peer, s);
    });
  }

  void put_signal(const Array& dst, const Array& src, const Array& sig, std::uint64_t value,
                  int peer, const std::string& op, std::int64_t stream) {
    const gnio::SymPtr<char> to = symmetric(dst, src.nbytes(), "put_signal: dst");
    const gnio::SymPtr<std::uint64_t> word = signal_word(sig, "put_signal: sig");
    const gnio::SignalOp sop = signal_op(op);
    const void* from = address(src, "put_signal: src");
    on_stream(stream, [&](gnio::StreamRef s) {
      gnio::put_signal_on_stream(comm(), to, from, src.nbytes(), word, value, sop, peer, s);
    });
  }

  void signal(const Array& sig, std::uint64_t value, int peer, const std::string& op,
              std::int64_t stream) {
    const gnio::SymPtr<std::uint64_t> word = signal_word(sig, "signal: sig");
    const gnio::SignalOp sop = signal_op(op);
    on_stream(stream, [&](gnio::StreamRef s) {
      gnio::signal_on_stream(comm(), word, value, sop, peer, s);
    });
  }

  void wait_signal(const Array& sig, const std::string& cmp, std::uint64_t value,
                   std::int64_t stream) {
    const gnio::SymPtr<std::uint64_t> word = signal_word(sig, "wait_signal: sig");
    const gnio::Cmp c = compare(cmp);
    on_stream(stream,
              [&](gnio::StreamRef s) { gnio::wait_signal_on_stream(comm(), word, c, value, s); });
  }

  /// This rank's DeviceComm as bytes (what a custom kernel takes by value).
  nb::bytes device_comm() {
    const gnio::DeviceComm dc = comm().device_handle();
    return nb::bytes(reinterpret_cast<const char*>(&dc), sizeof(dc));
  }

 private:
  gnio::DataType same_type(const Array& x, const Array& out, const char* what) {
    const gnio::DataType t = data_type(x, what);
    if (data_type(out, what) != t) invalid(std::string(what) + ": x and out differ in dtype");
    return t;
  }

  /// The symmetric address of `a`, a (view of a) buffer from empty(), which must hold `bytes`
  /// from where `a` starts.
  gnio::SymPtr<char> symmetric(const Array& a, std::size_t bytes, const char* what) {
    const auto at = reinterpret_cast<std::uintptr_t>(address(a, what));
    std::uintptr_t base = 0;
    if (const Buffer* b = containing(at, &base)) {
      if (bytes > a.nbytes() || at - base + bytes > b->bytes)
        invalid(std::string(what) + ": " + std::to_string(bytes) +
                " bytes do not fit (the array holds " + std::to_string(a.nbytes()) + ")");
      return b->at.byte_offset(at - base);
    }
    invalid(std::string(what) +
            " must be (a view of) a buffer from this communicator's empty()/zeros()");
  }

  gnio::SymPtr<std::uint64_t> signal_word(const Array& a, const char* what) {
    const nb::dlpack::dtype t = a.dtype();
    if (t.code != static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt) || t.bits != 64 ||
        a.size() != 1)
      invalid(std::string(what) + ": a signal is one uint64 element of a symmetric buffer");
    return symmetric(a, 8, what).cast<std::uint64_t>();
  }

  static gnio::SignalOp signal_op(const std::string& op) {
    if (op == "set") return gnio::SignalOp::Set;
    if (op == "add") return gnio::SignalOp::Add;
    invalid("signal op '" + op + "' is not one of set, add");
  }

  static gnio::Cmp compare(const std::string& cmp) {
    static const char* names[] = {"eq", "ne", "gt", "ge", "lt", "le"};
    for (int i = 0; i < 6; ++i)
      if (cmp == names[i]) return static_cast<gnio::Cmp>(i);
    invalid("cmp '" + cmp + "' is not one of eq, ne, gt, ge, lt, le");
  }

  nb::object wrap(void* at, std::size_t bytes) {
    std::shared_ptr<int> live = live_;
    ++*live;
    auto* holder = new std::shared_ptr<int>(live);
    nb::capsule owner(holder, [](void* h) noexcept {
      auto* l = static_cast<std::shared_ptr<int>*>(h);
      --**l;
      delete l;
    });
    const std::size_t shape[1] = {bytes};
    if (comm().backend() == gnio::Backend::Host)
      return nb::cast(nb::ndarray<nb::numpy, std::uint8_t>(at, 1, shape, owner));
    return nb::cast(nb::ndarray<std::uint8_t>(at, 1, shape, owner, nullptr,
                                              nb::dtype<std::uint8_t>(), nb::device::cuda::value,
                                              comm().device()));
  }

  std::optional<gnio::Comm> comm_;
  std::unique_ptr<gnio::Stream> stream_;
  struct Buffer {
    gnio::SymPtr<char> at;
    std::size_t bytes;
  };
  std::vector<Buffer> buffers_;

  /// The buffer from empty() whose local copy holds address `at` (its start in *base), or null.
  const Buffer* containing(std::uintptr_t at, std::uintptr_t* base) {
    gnio::Comm& c = comm();
    for (const Buffer& b : buffers_) {
      *base = reinterpret_cast<std::uintptr_t>(c.local_address(b.at));
      if (at >= *base && at < *base + (b.bytes == 0 ? 1 : b.bytes)) return &b;
    }
    return nullptr;
  }
  std::shared_ptr<int> live_;
};

}  // namespace

NB_MODULE(_gnio, m) {
  m.doc() = "gnio's C++ side; use the gnio package.";
  m.attr("__version__") = gnio::version_string();
  // A plain object() of the module's own, alive as long as the process.
  description_tag = PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type));
  m.attr("_description_tag") = nb::handle(description_tag);

  // gnio::Error -> the gnio.<class> exception defined in gnio/_errors.py.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      nb::object errors = nb::module_::import_("gnio._errors");
      nb::object cls = errors.attr(std::string(gnio::to_string(e.error_class())).c_str());
      PyErr_SetString(cls.ptr(), e.what());
    }
  });

  m.def("create_unique_id", [] {
    const gnio::UniqueId id = gnio::create_unique_id();
    return nb::bytes(reinterpret_cast<const char*>(id.bytes), sizeof(id.bytes));
  });

  nb::class_<PyComm>(m, "_Comm")
      .def_static("from_env", [] { return new PyComm(gnio::Comm::from_env()); })
      .def_static("from_unique_id",
                  [](nb::bytes id, int rank, int size) {
                    gnio::UniqueId u{};
                    if (id.size() != sizeof(u.bytes))
                      invalid("from_unique_id: a unique id is " + std::to_string(sizeof(u.bytes)) +
                              " bytes (create_unique_id())");
                    std::memcpy(u.bytes, id.c_str(), sizeof(u.bytes));
                    return new PyComm(gnio::Comm::from_unique_id(u, rank, size));
                  })
      .def_prop_ro("rank", [](PyComm& c) { return c.comm().rank(); })
      .def_prop_ro("size", [](PyComm& c) { return c.comm().size(); })
      .def_prop_ro("local_rank", [](PyComm& c) { return c.comm().local_rank(); })
      .def_prop_ro("local_size", [](PyComm& c) { return c.comm().local_size(); })
      .def_prop_ro("nodes", [](PyComm& c) { return c.comm().nodes(); })
      .def_prop_ro("device", [](PyComm& c) { return c.comm().device(); })
      .def_prop_ro("backend",
                   [](PyComm& c) { return std::string(gnio::to_string(c.comm().backend())); })
      .def_prop_ro("launcher", [](PyComm& c) { return c.comm().launch_source(); })
      .def_prop_ro("closed", &PyComm::closed)
      .def("close", &PyComm::close)
      .def("abort", &PyComm::abort)
      .def("check", [](PyComm& c) { c.comm().check(); })
      .def("all_reduce", &PyComm::all_reduce, nb::arg("x").noconvert(), nb::arg("out").noconvert(),
           nb::arg("op"), nb::arg("stream"))
      .def("all_gather", &PyComm::all_gather, nb::arg("x").noconvert(), nb::arg("out").noconvert(),
           nb::arg("stream"))
      .def("reduce_scatter", &PyComm::reduce_scatter, nb::arg("x").noconvert(),
           nb::arg("out").noconvert(), nb::arg("op"), nb::arg("stream"))
      .def("broadcast", &PyComm::broadcast, nb::arg("x").noconvert(), nb::arg("root"),
           nb::arg("stream"))
      .def("reduce", &PyComm::reduce, nb::arg("x").noconvert(), nb::arg("out").noconvert(),
           nb::arg("root"), nb::arg("op"), nb::arg("stream"))
      .def("all_to_all", &PyComm::all_to_all, nb::arg("x").noconvert(), nb::arg("out").noconvert(),
           nb::arg("stream"))
      .def("barrier", &PyComm::barrier)
      .def("put", &PyComm::put, nb::arg("dst").noconvert(), nb::arg("src").noconvert(),
           nb::arg("peer"), nb::arg("stream"))
      .def("get", &PyComm::get, nb::arg("dst").noconvert(), nb::arg("src").noconvert(),
           nb::arg("peer"), nb::arg("stream"))
      .def("put_signal", &PyComm::put_signal, nb::arg("dst").noconvert(),
           nb::arg("src").noconvert(), nb::arg("sig").noconvert(), nb::arg("value"),
           nb::arg("peer"), nb::arg("op"), nb::arg("stream"))
      .def("signal", &PyComm::signal, nb::arg("sig").noconvert(), nb::arg("value"), nb::arg("peer"),
           nb::arg("op"), nb::arg("stream"))
      .def("wait_signal", &PyComm::wait_signal, nb::arg("sig").noconvert(), nb::arg("cmp"),
           nb::arg("value"), nb::arg("stream"))
      .def("empty", &PyComm::empty)
      .def("peer", &PyComm::peer)
      .def("sym_ptr", &PyComm::sym_ptr, nb::arg("buffer").noconvert())
      .def("device_comm", &PyComm::device_comm);
}
