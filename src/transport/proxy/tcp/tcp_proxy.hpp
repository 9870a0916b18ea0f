// The proxy transport over the tcp backend (transport/net/tcp/): the progress threads that carry
// the ring's operations (proxy.hpp) to ranks on other nodes as framed messages and apply what
// those ranks send here.
//
// Connections (transport/net/tcp/tcp_mesh.hpp) open on first use by default: the sending thread
// of a lane connects to a peer with its first frame for it, and lane 0's receiving thread accepts
// the peers' connections and hands each lane its own.
//
// Two threads per communicator, so that neither can block the other: the sender drains the ring
// in ticket order, writes each operation as one frame (header + payload read straight from the
// source) to the target's connection, and writes the acknowledgements the receiver owes; the
// receiver only reads. With GNIO_NET_NSOCKS > 1 every peer has more connections ("lanes"), each
// with a sending and a receiving thread of its own: lane 0 carries the device API's operations,
// requests, replies and every ack (in order, so fence and quiet hold); the others carry the
// frames into landing regions (collectives' pipes), which the sender hands to the lane of their
// signal word, so that one pipe's messages stay in order while different pipes move in parallel.
// The ring's head (slot free, source read) passes a ticket only once its frame was sent, by
// whichever thread sent it. A receiver it validates every frame (magic, job token, byte range
// inside the region it names, aligned signal word) before writing a byte, applies data then signal,
// and counts what it applied. A frame names either this rank's symmetric heap (what the device API
// reaches) or one of the proxy's landing regions (host memory that collectives' pipes to other
// nodes use: written straight from the socket, signals with host atomics). Data for the heap goes
// through the receiving Staging's deliveries, which the thread queues without waiting; a put counts
// as applied (and is acked) once its delivery completed. Gets and atomics are requests: the
// target's receiver applies an atomic (or notes a get) and queues the reply, which its sender
// writes (a get's data read from the heap then); the requester's receiver accepts a reply only for
// a request of its own that is still open (same peer, same size), writes the data or old value
// where the device asked, and the request's ticket is done. A frame that fails validation is an
// error: nothing of it is written, the connection is closed and the communicator aborts (as does
// the sender's side once it sees the connection end). Every byte and word of this rank's memory is
// moved through a Staging (staging.hpp): directly on the host backend, through page-locked bounce
// buffers and a one-thread kernel for signals and atomics on GPUs.
#pragma once

#include <memory>

#include "transport/proxy/proxy.hpp"

namespace gnio::proxy {

/// A tcp proxy, connected to every rank on another node (collective over every rank).
std::unique_ptr<Proxy> make_tcp_proxy(const ProxyArgs& args);

}  // namespace gnio::proxy
