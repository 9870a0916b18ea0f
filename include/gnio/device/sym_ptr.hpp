// SymPtr<T>: a pointer into a communicator's symmetric heap. An allocation made collectively has
// the same offset on every rank, so one SymPtr names "the same buffer" on every rank; the device
// handle (DeviceComm::local / DeviceComm::peer) turns it into an address.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/device/macros.hpp"

namespace gnio {

/// A typed offset into a symmetric heap. Trivially copyable; pass it to kernels by value.
/// Arithmetic moves in elements, like a raw pointer.
template <class T>
struct SymPtr {
  std::uint32_t heap = 0;    ///< id of the heap (the communicator) it belongs to; 0 = null
  std::uint32_t reserved = 0;
  std::uint64_t offset = 0;  ///< byte offset from the heap's base, equal on every rank

  GNIO_HD_INLINE bool is_null() const { return heap == 0; }
  GNIO_HD_INLINE explicit operator bool() const { return heap != 0; }

  GNIO_HD_INLINE SymPtr operator+(std::ptrdiff_t n) const {
    return {heap, reserved, offset + static_cast<std::uint64_t>(n * static_cast<std::ptrdiff_t>(sizeof(T)))};
  }
  GNIO_HD_INLINE SymPtr operator-(std::ptrdiff_t n) const { return *this + (-n); }
  GNIO_HD_INLINE SymPtr& operator+=(std::ptrdiff_t n) { return *this = *this + n; }

  /// The same address viewed as another element type.
  template <class U>
  GNIO_HD_INLINE SymPtr<U> cast() const {
    return {heap, reserved, offset};
  }
  /// The address `bytes` further on, as another type (for byte-offset layouts).
  template <class U = T>
  GNIO_HD_INLINE SymPtr<U> byte_offset(std::uint64_t bytes) const {
    return {heap, reserved, offset + bytes};
  }

  GNIO_HD_INLINE bool operator==(const SymPtr& o) const { return heap == o.heap && offset == o.offset; }
  GNIO_HD_INLINE bool operator!=(const SymPtr& o) const { return !(*this == o); }
};

static_assert(sizeof(SymPtr<int>) == 16, "SymPtr is two words");

}  // namespace gnio
