#include "impls/transport/proxy/proxy_transport.hpp"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "impls/channel/fifo_host.hpp"
#include "impls/channel/proxy_engine.hpp"
#include "impls/device/device.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/direct/direct_transport_impl.hpp"

namespace eps::transport {
namespace {

using channel::Command;
using channel::CommandType;

// Command flags of this transport: the parity; a signal record (signal regions, signal immediate); a stream's
// last data put carrying the signal (data regions, signal immediate; docs/fabrics.md 6.2).
constexpr std::uint32_t kParityFlag = 1;
constexpr std::uint32_t kSignalFlag = 2;
constexpr std::uint32_t kSignalOnDataFlag = 4;
constexpr const char* kAcrossNodesVariable = "EPS_PROXY_ACROSS_NODES";

class ProxyTransport final : public direct_detail::DirectTransport {
 public:
  ProxyTransport(const TransportConfig& config, const fabric::FabricSelection& selection, int rank, int size,
                 std::unique_ptr<fabric::Fabric> fab)
      : DirectTransport(config, selection, rank, size, std::move(fab), proxy_capabilities()) {}
  ~ProxyTransport() override {
    // The proxies stop before the direct teardown quiets the fabric and meets the peers on this thread.
    if (engine_) (void)engine_->stop();
  }

  std::string_view name() const override { return "proxy"; }
  std::string describe() const override {
    return fmt::format("proxy ({} proxy threads, signal {}) over {}", engine_ ? engine_->threads() : 0,
                       signal_->name(), fabric_->describe());
  }

  Status setup() override {
    EPS_RETURN_IF_ERROR(DirectTransport::setup());
    batch_.assign(static_cast<std::size_t>(size_), {});
    EPS_RETURN_IF_ERROR(check_command_limits());
    channel::ProxyEngineConfig engine;
    engine.fifos = size_;
    engine.threads = selection_.proxy_threads;
    engine.fifo_capacity = 1024;
    engine.flush_timeout_seconds = config_.timeout_seconds;
    EPS_ASSIGN_OR_RETURN(engine_, channel::ProxyEngine::start(
                                      engine, *fabric_, [this](const Command& c, int) { return to_put(c); }));
    return Status();
  }

 private:
  Status check_command_limits() const {
    const auto limit = std::uint64_t{1} << 32;
    for (const fabric::Region* region : {&send_, &recv_, &signal_send_, &signal_recv_}) {
      if (region->local.size() >= limit) {
        return invalid_argument("max_tokens_per_rank",
                                "the proxy transport's regions must stay below 4 GiB (32-bit "
                                "command offsets, docs/channel.md 7.1); this shape needs {} bytes",
                                region->local.size());
      }
    }
    if (size_ >= static_cast<int>(channel::kMaxCommandRanks)) {
      return out_of_range("ranks", 1, static_cast<int>(channel::kMaxCommandRanks) - 1, size_);
    }
    if (local() >= static_cast<int>(channel::kMaxCommandChannels)) {
      return out_of_range("local experts", 1, static_cast<int>(channel::kMaxCommandChannels) - 1, local());
    }
    return Status();
  }

  // On a proxy thread, in FIFO order for the command's destination: the put and its immediate.
  Result<fabric::PutOp> to_put(const Command& c) {
    const int peer = static_cast<int>(c.destination());
    const int parity = static_cast<int>(c.flags() & kParityFlag);
    if ((c.flags() & kSignalFlag) != 0) {
      EPS_ASSIGN_OR_RETURN(std::uint32_t imm, signal_->signal_imm(peer, parity));
      return fabric::PutOp{
          peer, signal_send_.id, c.local_offset(), signal_recv_.id, c.remote_offset(), c.bytes(), imm, 0};
    }
    if ((c.flags() & kSignalOnDataFlag) != 0) {
      EPS_ASSIGN_OR_RETURN(std::uint32_t imm, signal_->signal_imm(peer, parity));
      return fabric::PutOp{peer, send_.id, c.local_offset(), recv_.id, c.remote_offset(), c.bytes(), imm, 0};
    }
    const std::size_t record = record_bytes_.load(std::memory_order_relaxed);
    const int tokens = static_cast<int>(c.bytes() / record);
    EPS_ASSIGN_OR_RETURN(std::optional<std::uint32_t> imm,
                         signal_->data_imm(peer, parity, static_cast<int>(c.channel()), tokens));
    return fabric::PutOp{peer, send_.id, c.local_offset(), recv_.id, c.remote_offset(), c.bytes(), imm, 0};
  }

  // The producers are the device's kernels (docs/channel.md 7.1): an exchange's commands are collected, then
  // pushed by the fifo_push kernel of the transport's data-path device, one producer per command (on the
  // `cpu` device, host threads standing in for warps). Commands for one destination may enter its FIFO in any
  // order within a batch: the proxies number puts in pop order, and the signal writes are a later batch.
  Status launch_batch() {
    std::uint64_t gave_up = 0;
    const auto budget = static_cast<std::int64_t>(config_.timeout_seconds * 1e9);
    for (int q = 0; q < size_; ++q) {
      std::vector<Command>& mine = batch_[static_cast<std::size_t>(q)];
      if (mine.empty()) continue;
      EPS_RETURN_IF_ERROR(kernels().run(
          device::FifoPushArgs{engine_->fifo(q), mine.data(), static_cast<std::int64_t>(mine.size()),
                               kMaxPolls, &gave_up, channel::producer_clock_ns() + budget}));
      EPS_RETURN_IF_ERROR(kernels().synchronize());
      engine_->wake_fifo(q);
      mine.clear();
      if (gave_up != 0) {
        EPS_RETURN_IF_ERROR(engine_->status());
        return Status(
            StatusCode::kEnvironment,
            fmt::format("timed out after {} s: {} producers found the command FIFO of rank {} full ({})",
                        config_.timeout_seconds, gave_up, q, where()));
      }
    }
    return Status();
  }

  void queue(int peer, const channel::CommandFields& fields) {
    batch_[static_cast<std::size_t>(peer)].push_back(channel::pack_command(fields));
  }

  Status put_data(int peer, int parity, int channel, int tokens, std::size_t record_bytes,
                  std::size_t local_offset, std::size_t remote_offset) override {
    record_bytes_.store(record_bytes, std::memory_order_relaxed);  // published by the FIFO's release store
    const std::size_t bytes = static_cast<std::size_t>(tokens) * record_bytes;
    queue(peer, {CommandType::kWrite, static_cast<std::uint32_t>(parity), static_cast<std::uint32_t>(channel),
                 static_cast<std::uint32_t>(peer), bytes, local_offset, remote_offset});
    if (peer != rank_) wire_.sent += static_cast<std::int64_t>(bytes);
    return Status();
  }

  Status put_signal(int peer, int parity, std::size_t local_offset, std::size_t remote_offset,
                    std::size_t bytes) override {
    queue(peer, {CommandType::kWrite, static_cast<std::uint32_t>(parity) | kSignalFlag, 0,
                 static_cast<std::uint32_t>(peer), bytes, local_offset, remote_offset});
    if (peer != rank_) wire_.sent += static_cast<std::int64_t>(bytes);
    return Status();
  }

  // In the batch of the signal writes, so the proxy numbers it after every data put of its stream.
  Status put_data_with_signal(int peer, int parity, const direct_detail::DataPut& put,
                              std::size_t record_bytes) override {
    const std::size_t bytes = static_cast<std::size_t>(put.tokens) * record_bytes;
    queue(peer, {CommandType::kWrite, static_cast<std::uint32_t>(parity) | kSignalOnDataFlag,
                 static_cast<std::uint32_t>(put.channel), static_cast<std::uint32_t>(peer), bytes,
                 put.local_offset, put.remote_offset});
    if (peer != rank_) wire_.sent += static_cast<std::int64_t>(bytes);
    return Status();
  }

  Status data_puts_done(int) override { return launch_batch(); }
  Status signal_puts_done(int) override { return launch_batch(); }

  // sender-barrier: each FIFO holds its signal write behind a QUIET until its data puts completed.
  Status await_data_completions(int) override {
    for (int q = 0; q < size_; ++q) {
      queue(q, {CommandType::kQuiet, 0, 0, static_cast<std::uint32_t>(q), 0, 0, 0});
    }
    return launch_batch();
  }

  Status pump() override {
    EPS_RETURN_IF_ERROR(engine_->status());
    for (std::uint32_t imm : engine_->take_remote()) {
      const Status status = signal_->on_remote(imm);
      if (!status.ok())
        return Status(StatusCode::kCheckFailed, fmt::format("{} ({})", status.message(), where()));
    }
    return Status();
  }

  Status quiet_puts() override { return engine_->quiet(Deadline(config_.timeout_seconds)); }

  // Polls of a full FIFO before a device producer gives up (the proxies drain a FIFO in microseconds; this is
  // minutes of polling, the host deadline's stand-in on a device).
  static constexpr std::uint64_t kMaxPolls = std::uint64_t{1} << 34;

  std::unique_ptr<channel::ProxyEngine> engine_;
  std::vector<std::vector<Command>> batch_;  // per destination: the commands of the next launch
  std::atomic<std::size_t> record_bytes_{1};
};

Status check_proxy_threads(const fabric::FabricSelection& selection) {
  if (selection.proxy_threads < 1 || selection.proxy_threads > channel::kMaxProxyThreads) {
    return out_of_range("--proxy-threads", 1, channel::kMaxProxyThreads, selection.proxy_threads);
  }
  return Status();
}

// Across nodes the proxy is opt-in (EPS_PROXY_ACROSS_NODES=1, docs/channel.md): its conformance suite passes
// between the virtual cluster's nodes, but a layer bench there once ended in a timeout not yet understood.
// Every rank sees the same layout and, under mpirun -x, the same environment.
Status check_nodes_allowed(const TransportConfig& config) {
  EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout nodes,
                       mpi::node_layout(config.comm, Deadline(config.timeout_seconds)));
  const char* opt_in = std::getenv(kAcrossNodesVariable);
  if (nodes.nodes() == 1 || (opt_in != nullptr && std::string_view(opt_in) == "1")) return Status();
  return Status(StatusCode::kUnavailable,
                fmt::format("proxy across {} nodes is experimental: set {}=1 to run it (docs/channel.md)",
                            nodes.nodes(), kAcrossNodesVariable));
}

}  // namespace

Capabilities proxy_capabilities() { return direct_capabilities(); }

Result<std::unique_ptr<Transport>> make_proxy_transport(const TransportConfig& config,
                                                        const fabric::FabricSelection& selection) {
  // The shape and --proxy-threads are checked before the fabric is made (and again by _over).
  int size = 0;
  EPS_MPI_CHECK(MPI_Comm_size(config.comm, &size));
  EPS_RETURN_IF_ERROR(validate_config(config, size, proxy_capabilities()));
  EPS_RETURN_IF_ERROR(check_proxy_threads(selection));
  EPS_RETURN_IF_ERROR(check_nodes_allowed(config));
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Fabric> fab,
                       fabric::make_fabric(selection, config.comm, config.timeout_seconds));
  return make_proxy_transport_over(config, selection, std::move(fab));
}

Result<std::unique_ptr<Transport>> make_proxy_transport_over(const TransportConfig& config,
                                                             const fabric::FabricSelection& selection,
                                                             std::unique_ptr<fabric::Fabric> fab) {
  EPS_RETURN_IF_ERROR(validate_config(config, fab->size(), proxy_capabilities()));
  EPS_RETURN_IF_ERROR(check_proxy_threads(selection));
  const int rank = fab->rank();
  const int size = fab->size();
  auto transport = std::make_unique<ProxyTransport>(config, selection, rank, size, std::move(fab));
  EPS_RETURN_IF_ERROR(transport->setup());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace eps::transport
