#include "impls/transport/proxy/fifo_put_path.hpp"

#include <atomic>
#include <vector>

#include <fmt/format.h>

#include "impls/channel/fifo_host.hpp"
#include "impls/channel/proxy_engine.hpp"

namespace eps::transport {
namespace {

using channel::Command;
using channel::CommandType;

// Command flags of this path: the parity; a signal record (signal regions, signal immediate); a stream's
// last data put carrying the signal (data regions, signal immediate; docs/fabrics.md 6.2).
constexpr std::uint32_t kParityFlag = 1;
constexpr std::uint32_t kSignalFlag = 2;
constexpr std::uint32_t kSignalOnDataFlag = 4;

// Polls of a full FIFO before a device producer gives up (the proxies drain a FIFO in microseconds; this is
// minutes of polling, the host deadline's stand-in on a device).
constexpr std::uint64_t kMaxPolls = std::uint64_t{1} << 34;

class FifoPutPath final : public PutPath {
 public:
  explicit FifoPutPath(const PutContext& context)
      : c_(context), batch_(static_cast<std::size_t>(context.ranks)) {}
  // The proxies stop before the protocol's teardown quiets the fabric and meets the peers on this thread.
  ~FifoPutPath() override {
    if (engine_) (void)engine_->stop();
  }

  Status start(int proxy_threads) {
    EPS_RETURN_IF_ERROR(check_command_limits());
    channel::ProxyEngineConfig engine;
    engine.fifos = c_.ranks;
    engine.threads = proxy_threads;
    engine.fifo_capacity = 1024;
    engine.flush_timeout_seconds = c_.timeout_seconds;
    EPS_ASSIGN_OR_RETURN(
        engine_,
        channel::ProxyEngine::start(engine, c_.fabric, [this](const Command& c, int) { return to_put(c); }));
    return Status();
  }

  std::string detail() const override {
    return fmt::format("{} proxy threads", engine_ ? engine_->threads() : 0);
  }

  // Nothing to wait for (every operation ended with quiet()); one poll for immediates that came early.
  Status begin(int) override { return progress(); }

  Status put_data(int peer, int parity, const DataPut& put, std::size_t record_bytes) override {
    record_bytes_.store(record_bytes, std::memory_order_relaxed);  // published by the FIFO's release store
    queue(peer, {CommandType::kWrite, static_cast<std::uint32_t>(parity),
                 static_cast<std::uint32_t>(put.channel), static_cast<std::uint32_t>(peer),
                 static_cast<std::size_t>(put.records) * record_bytes, put.local_offset, put.remote_offset});
    return Status();
  }

  Status put_signal(int peer, int parity, std::size_t local_offset, std::size_t remote_offset,
                    std::size_t bytes) override {
    queue(peer, {CommandType::kWrite, static_cast<std::uint32_t>(parity) | kSignalFlag, 0,
                 static_cast<std::uint32_t>(peer), bytes, local_offset, remote_offset});
    return Status();
  }

  // In the batch of the signal writes, so the proxy numbers it after every data put of its stream.
  Status put_data_with_signal(int peer, int parity, const DataPut& put, std::size_t record_bytes) override {
    queue(peer, {CommandType::kWrite, static_cast<std::uint32_t>(parity) | kSignalOnDataFlag,
                 static_cast<std::uint32_t>(put.channel), static_cast<std::uint32_t>(peer),
                 static_cast<std::size_t>(put.records) * record_bytes, put.local_offset, put.remote_offset});
    return Status();
  }

  Status data_puts_done(int) override { return launch_batch(); }
  Status signal_puts_done(int) override { return launch_batch(); }

  // sender-barrier: each FIFO holds its signal write behind a QUIET until its data puts completed.
  Status await_data_placed(int) override {
    for (int q = 0; q < c_.ranks; ++q)
      queue(q, {CommandType::kQuiet, 0, 0, static_cast<std::uint32_t>(q), 0, 0, 0});
    return launch_batch();
  }

  Status progress() override {
    EPS_RETURN_IF_ERROR(engine_->status());
    for (std::uint32_t imm : engine_->take_remote()) EPS_RETURN_IF_ERROR(c_.on_immediate(imm));
    return Status();
  }

  Status quiet() override { return engine_->quiet(Deadline(c_.timeout_seconds)); }

 private:
  Status check_command_limits() const {
    const auto limit = std::uint64_t{1} << 32;
    for (const fabric::Region* region : {&c_.send, &c_.recv, &c_.signal_send, &c_.signal_recv}) {
      if (region->local.size() >= limit) {
        return invalid_argument("max_tokens_per_rank",
                                "the proxy transport's regions must stay below 4 GiB (32-bit "
                                "command offsets, docs/channel.md 7.1); this shape needs {} bytes",
                                region->local.size());
      }
    }
    if (c_.ranks >= static_cast<int>(channel::kMaxCommandRanks)) {
      return out_of_range("ranks", 1, static_cast<int>(channel::kMaxCommandRanks) - 1, c_.ranks);
    }
    if (c_.channels >= static_cast<int>(channel::kMaxCommandChannels)) {
      return out_of_range("local experts", 1, static_cast<int>(channel::kMaxCommandChannels) - 1,
                          c_.channels);
    }
    return Status();
  }

  // On a proxy thread, in FIFO order for the command's destination: the put and its immediate.
  Result<fabric::PutOp> to_put(const Command& c) {
    const int peer = static_cast<int>(c.destination());
    const int parity = static_cast<int>(c.flags() & kParityFlag);
    if ((c.flags() & kSignalFlag) != 0) {
      EPS_ASSIGN_OR_RETURN(std::uint32_t imm, c_.signal.signal_imm(peer, parity));
      return fabric::PutOp{
          peer, c_.signal_send.id, c.local_offset(), c_.signal_recv.id, c.remote_offset(), c.bytes(), imm, 0};
    }
    if ((c.flags() & kSignalOnDataFlag) != 0) {
      EPS_ASSIGN_OR_RETURN(std::uint32_t imm, c_.signal.signal_imm(peer, parity));
      return fabric::PutOp{peer, c_.send.id, c.local_offset(), c_.recv.id, c.remote_offset(), c.bytes(),
                           imm,  0};
    }
    const std::size_t record = record_bytes_.load(std::memory_order_relaxed);
    const int tokens = static_cast<int>(c.bytes() / record);
    EPS_ASSIGN_OR_RETURN(std::optional<std::uint32_t> imm,
                         c_.signal.data_imm(peer, parity, static_cast<int>(c.channel()), tokens));
    return fabric::PutOp{peer, c_.send.id, c.local_offset(), c_.recv.id, c.remote_offset(), c.bytes(),
                         imm,  0};
  }

  // The producers are the device's kernels (docs/channel.md 7.1): an exchange's commands are collected, then
  // pushed by the fifo_push kernel of the data path's device, one producer per command (on the `cpu` device,
  // host threads standing in for warps). Commands for one destination may enter its FIFO in any order within
  // a batch: the proxies number puts in pop order, and the signal writes are a later batch.
  Status launch_batch() {
    std::uint64_t gave_up = 0;
    const auto budget = static_cast<std::int64_t>(c_.timeout_seconds * 1e9);
    for (int q = 0; q < c_.ranks; ++q) {
      std::vector<Command>& mine = batch_[static_cast<std::size_t>(q)];
      if (mine.empty()) continue;
      EPS_RETURN_IF_ERROR(c_.device.run(
          device::FifoPushArgs{engine_->fifo(q), mine.data(), static_cast<std::int64_t>(mine.size()),
                               kMaxPolls, &gave_up, channel::producer_clock_ns() + budget}));
      EPS_RETURN_IF_ERROR(c_.device.synchronize());
      engine_->wake_fifo(q);
      mine.clear();
      if (gave_up != 0) {
        EPS_RETURN_IF_ERROR(engine_->status());
        return Status(
            StatusCode::kEnvironment,
            fmt::format("timed out after {} s: {} producers found the command FIFO of rank {} full ({})",
                        c_.timeout_seconds, gave_up, q, c_.where()));
      }
    }
    return Status();
  }

  void queue(int peer, const channel::CommandFields& fields) {
    batch_[static_cast<std::size_t>(peer)].push_back(channel::pack_command(fields));
  }

  PutContext c_;
  std::unique_ptr<channel::ProxyEngine> engine_;
  std::vector<std::vector<Command>> batch_;  // per destination: the commands of the next launch
  std::atomic<std::size_t> record_bytes_{1};
};

}  // namespace

Result<std::unique_ptr<PutPath>> start_fifo_put_path(const PutContext& context, int proxy_threads) {
  auto path = std::make_unique<FifoPutPath>(context);
  EPS_RETURN_IF_ERROR(path->start(proxy_threads));
  return std::unique_ptr<PutPath>(std::move(path));
}

}  // namespace eps::transport
