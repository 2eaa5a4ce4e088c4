// The put path of the direct protocol (direct_protocol.hpp): how the protocol's puts reach the fabric and how
// their completions come back. The protocol decides every put (which bytes, to whom, in which order, which
// carries the signal) and the put path only issues them:
// - `direct` (direct/fabric_put_path.hpp): the calling thread posts each put to the Fabric itself;
// - `proxy` (proxy/fifo_put_path.hpp): each put becomes a 16-byte WRITE command in the FIFO of its
//   destination, pushed by the data path's device, and CPU proxy threads post them (docs/channel.md 7).
//
// Order of calls in one operation of parity p (offsets are within the regions, parity included):
//   begin(p); put_data ... ; data_puts_done(p); [sender-barrier: await_data_placed(p)];
//   put_signal / put_data_with_signal ... ; signal_puts_done(p); progress() until every stream arrived;
//   quiet().
// Immediates come from the signal strategy in issue order (data_imm for data puts, signal_imm for signal
// puts and for a data put carrying the signal, docs/fabrics.md 6.2); received immediates go to
// PutContext::on_immediate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "impls/device/device.hpp"
#include "impls/fabric/fabric.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"
#include "reference/common/status.hpp"

namespace eps::transport {

// One data put: `records` records of the channel (a local expert, or 0) from the send region at
// local_offset to the destination's receive region at remote_offset.
struct DataPut {
  int channel = 0;
  int records = 0;
  std::size_t local_offset = 0;
  std::size_t remote_offset = 0;
};

// What a put path posts with: the protocol's fabric, strategy and regions (alive as long as the put path),
// its shape, and two callbacks into the protocol.
struct PutContext {
  fabric::Fabric& fabric;
  fabric::SignalStrategy& signal;
  const fabric::Region& send;         // data: this rank's send region
  const fabric::Region& recv;         // data: the receive regions
  const fabric::Region& signal_send;  // signal records, sent
  const fabric::Region& signal_recv;  // signal records, received
  int rank = 0;
  int ranks = 1;
  int channels = 1;  // local experts
  double timeout_seconds = 60.0;
  device::Device& device;  // the data path's device: where producers of commands run
  // "<transport> transport, rank r, operation n, signal s, fabric f": for every diagnostic.
  std::function<std::string()> where;
  // A received immediate, to the signal strategy (an error names it and where()).
  std::function<Status(std::uint32_t imm)> on_immediate;
};

class PutPath {
 public:
  virtual ~PutPath() = default;
  // What describe() says of the path before the signal strategy ("4 proxy threads"); empty for none.
  virtual std::string detail() const { return {}; }

  // The puts of parity p's previous operation (two operations ago) no longer read their sources.
  virtual Status begin(int parity) = 0;
  // A data put of `record_bytes`-byte records to `peer`.
  virtual Status put_data(int peer, int parity, const DataPut& put, std::size_t record_bytes) = 0;
  // The signal record to `peer`: `bytes` from the signal_send region to the peer's signal_recv region.
  virtual Status put_signal(int peer, int parity, std::size_t local_offset, std::size_t remote_offset,
                            std::size_t bytes) = 0;
  // The last data put of the stream to `peer`, carrying the stream's signal immediate (docs/fabrics.md 6.2).
  virtual Status put_data_with_signal(int peer, int parity, const DataPut& put, std::size_t record_bytes) = 0;
  // After an operation's data puts, and after its signal puts (a path that batches puts issues them here).
  virtual Status data_puts_done(int parity) = 0;
  virtual Status signal_puts_done(int parity) = 0;
  // sender-barrier: every data put of this parity is placed before any signal put is issued.
  virtual Status await_data_placed(int parity) = 0;
  // Drives progress: local completions counted, received immediates handed to on_immediate.
  virtual Status progress() = 0;
  // Every put issued so far is placed at its target (the end of an operation).
  virtual Status quiet() = 0;
};

// Makes the put path of a protocol once its regions and strategy exist.
using PutPathFactory = std::function<Result<std::unique_ptr<PutPath>>(const PutContext& context)>;

}  // namespace eps::transport
