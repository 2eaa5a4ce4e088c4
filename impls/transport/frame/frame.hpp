// The frame every built-in transport is made of (docs/architecture.md "A transport"): a Transport that owns
// the shapes, the declared capabilities and the data path (data_path.hpp), checks every argument of the
// Transport contract once (checks.hpp: an undeclared layout, the inputs, the output sizes, a handle of
// another transport, the combine arguments), builds the source side of a fresh dispatch (a RoutedHandle with
// its SendPlan and docs/dispatch.md 5.1 layout), quantizes for a protocol that does not fuse the quantizer
// (docs/dispatch.md 5.8), stages the caller's buffers through host memory where the data path's device cannot
// address them, or only their index arrays where the data path is GPU-resident (staging.cpp, transport.hpp
// "Memory", docs/devices.md 12.9), and writes the combined weights. What moves the rows
// between ranks is the transport's Protocol: mpi's alltoallv (mpi/), the direct protocol over a put path
// (protocol/, used by direct/ and proxy/).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "impls/transport/data_path/data_path.hpp"
#include "impls/transport/routing/routing.hpp"
#include "impls/transport/transport.hpp"

namespace eps::transport {

// What a dispatch through the frame leaves for combine: the source side (`sends`), the layout of this rank's
// tokens and the rows written. A protocol derives its own handle from it (Protocol::make_handle) and
// downcasts with static_cast: the frame hands it only handles that protocol made.
class RoutedHandle : public DispatchHandle {
 public:
  Layout layout_kind() const override { return sends.layout; }
  std::int64_t num_recv_rows() const override { return num_rows; }
  const dispatch::DispatchLayout& layout() const override { return layout_info; }

  const void* owner = nullptr;  // the transport that made it
  SendPlan sends;
  dispatch::DispatchLayout layout_info;  // the rank prefix matrix is the protocol's to fill
  std::int64_t num_rows = 0;             // rows written to the caller's receive buffers (the protocol's)
};

// How a transport moves rows between ranks, behind the frame. Every call gets checked arguments in memory
// the data path's device addresses; a call is collective like the Transport call it serves.
class Protocol {
 public:
  virtual ~Protocol() = default;
  // Transport::name, describe and identity (transport.hpp).
  virtual std::string_view name() const = 0;
  virtual std::string describe() const { return std::string(name()); }
  virtual std::map<std::string, std::string> identity() const {
    return {{"fabric", "none"}, {"signal", "none"}, {"chaos", "off"}};
  }
  // How the wire reaches unstaged buffers (results field `staging`, docs/devices.md): "none", or the fabric's
  // registration ("fi-hmem:<iface>", "dma-buf", "host-staging: <reason>").
  virtual std::string region_memory() const { return "none"; }
  virtual WireBytes wire_bytes() const = 0;

  // An empty handle of the protocol's own type.
  virtual std::unique_ptr<RoutedHandle> make_handle() const = 0;
  // Whether dispatch and dispatch_cached take inputs with `quantize` set (and quantize while packing);
  // otherwise the frame hands them the fp8 codes and scales of DataPath::quantized_input.
  virtual bool fuses_quantize() const { return false; }
  // A fresh dispatch: `handle` holds the source side; the protocol moves the rows and fills its part.
  virtual Status dispatch(RoutedHandle& handle, const DispatchInput& input, const DispatchOutput& output) = 0;
  // New payloads along the routing of `handle` (docs/dispatch.md 5.2).
  virtual Status dispatch_cached(const RoutedHandle& handle, const DispatchInput& input,
                                 const DispatchOutput& output) = 0;
  // The expert outputs back to their sources, reduced on the tree of `input` into output.out.
  virtual Status combine(const RoutedHandle& handle, const CombineInput& input,
                         const CombineOutput& output) = 0;
};

// The transport of `protocol` running on `data_path` (the protocol holds a reference to it; the frame keeps
// both alive and destroys the protocol first). `config` is what config() reports.
std::unique_ptr<Transport> make_framed_transport(const TransportConfig& config, Capabilities caps, int rank,
                                                 int size, std::unique_ptr<DataPath> data_path,
                                                 std::unique_ptr<Protocol> protocol);

}  // namespace eps::transport
