// eth::Port: a Linux network interface's queue opened for kernels (AF_XDP). Packets land in
// page-locked memory registered with the GPU (the UMEM), kernels consume the receive ring and
// produce the transmit ring themselves (<gnio/device/eth.hpp>), and a CPU thread of the port only
// wakes the socket to send. With the host backend the same kernels run on CPU threads.
//
//   gnio::eth::Port port(comm, {.interface = "eth1", .queue = 0});
//   std::printf("%s\n", port.mode().c_str());   // "AF_XDP, copy mode, XDP in skb mode (...)"
//   launch a kernel with port.rx(), port.tx() ...;   port.stop();   comm.synchronize(stream);
//
// The XDP program that steers the queue's packets to the socket is libxdp's (loaded at run time:
// libxdp1 and libbpf1 must be installed); every packet arriving on that queue goes to the port,
// none to the Linux stack, until the port closes and removes the program.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device/eth.hpp"

namespace gnio::eth {

/// How to attach: the mode is tried in this order where Auto, and the port says which ran.
enum class XdpMode {
  Auto,    ///< driver mode with zero copy, else driver mode copying, else skb (generic) mode
  Driver,  ///< XDP in the driver (native); zero copy where the driver has it
  Skb,     ///< generic XDP after the driver (every driver, veth included; copies)
};

/// Which socket: AF_XDP (packets steered to the port, kernels drive the rings the Linux kernel
/// maps) or AF_PACKET (a copy of every packet, moved between the socket and rings of the same
/// layout by the port's CPU thread; the Linux stack still sees the packets).
enum class SocketKind {
  Auto,    ///< AF_XDP, and AF_PACKET where AF_XDP is unavailable (the port says why)
  Xdp,     ///< AF_XDP only
  Packet,  ///< AF_PACKET only
};

struct PortOptions {
  std::string interface;       ///< e.g. "eth1", "veth0"
  unsigned queue = 0;          ///< the interface's RX/TX queue
  unsigned frames = 4096;      ///< UMEM frames (half receive, half transmit); a power of two
  unsigned frame_size = 2048;  ///< bytes per frame (2048 or 4096)
  XdpMode mode = XdpMode::Auto;
  SocketKind socket = SocketKind::Auto;
};

/// What the port counted (the kernels' ring indices and the socket's XDP_STATISTICS).
struct PortStats {
  std::uint64_t received = 0;       ///< frames kernels took from the RX ring
  std::uint64_t sent = 0;           ///< frames Linux reported sent
  std::uint64_t rx_dropped = 0;     ///< dropped by Linux for reasons other than below
  std::uint64_t rx_invalid = 0;     ///< invalid descriptors
  std::uint64_t rx_ring_full = 0;   ///< dropped: the RX ring was full (kernels too slow)
  std::uint64_t rx_fill_empty = 0;  ///< times Linux found no fill-ring frame to receive into
  std::uint64_t tx_invalid = 0;     ///< invalid TX descriptors
  std::uint64_t tx_ring_empty = 0;  ///< times Linux found the TX ring empty when woken
  std::uint64_t wakeups = 0;        ///< sendto() calls the CPU thread made for TX
};

/// A network interface as gnio-info lists it (read from /sys/class/net; opens nothing).
struct InterfaceInfo {
  std::string name;
  int ifindex = 0;
  std::string mac;  ///< "02:00:00:00:00:01"
  unsigned mtu = 0;
  bool up = false;  ///< operstate "up" (or "unknown" with the link up, as veth reports)
  unsigned rx_queues = 0, tx_queues = 0;
  std::string driver;  ///< "mlx5_core", "veth", ... ("" when sysfs does not say)
  /// The driver is known to support AF_XDP zero copy (mlx5, ice, i40e, ixgbe, igc, ...); others
  /// copy. Port::mode() says what actually ran.
  bool zero_copy_driver = false;
};

/// Every interface of this network namespace but loopback, by name.
std::vector<InterfaceInfo> interfaces();
/// Whether ports can open here, in one line: "AF_XDP through libxdp (loaded)" or why not.
std::string availability();

class Port {
 public:
  /// Opens `options.interface` queue `options.queue` for `comm`'s device (its GPU, or CPU threads
  /// on the host backend). Throws Error: InvalidArgument (no such interface, bad sizes),
  /// Unsupported (no AF_XDP, libxdp missing, the GPU refused to register the rings; the text
  /// says which), SystemError (permission: needs CAP_NET_ADMIN and CAP_NET_RAW).
  Port(Comm& comm, const PortOptions& options);
  /// Removes the XDP program and frees the rings and packet memory: call stop() and let the
  /// kernels using the queues end (synchronize their stream) first.
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  /// Queue handles for kernels (valid until the port closes).
  RxQueue rx() const;
  TxQueue tx() const;
  /// One line: socket type (AF_XDP or AF_PACKET), copy or zero-copy, XDP mode, and why (what
  /// was refused first).
  std::string mode() const;
  /// Asks kernels to end (RxQueue::stopped()); the port keeps running until destroyed.
  void stop();
  PortStats stats() const;
  /// The interface's MAC address (6 bytes) and index.
  const std::uint8_t* mac() const;
  int ifindex() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gnio::eth
