#include "impls/transport/direct/fabric_put_path.hpp"

#include <vector>

#include <fmt/format.h>

#include "impls/runtime/deadline.hpp"

namespace eps::transport {
namespace {

using fabric::Completion;
using fabric::CompletionKind;
using fabric::PutOp;

// Put contexts: bit 0 = parity of the operation, bit 1 = signal put.
constexpr std::uint64_t kSignalBit = 2;

class FabricPutPath final : public PutPath {
 public:
  explicit FabricPutPath(const PutContext& context) : c_(context), completions_(64) {}

  // The send region and signal records of this parity were last used two operations ago: wait for those
  // puts' local completions (peers are polling by now, so providers with manual progress complete them).
  Status begin(int parity) override {
    EPS_RETURN_IF_ERROR(progress_until(
        [&] { return completed_[parity] == posted_[parity]; },
        [&] {
          return fmt::format("local completions of the {} puts of this parity's previous operation, {} seen",
                             posted_[parity], completed_[parity]);
        }));
    posted_[parity] = completed_[parity] = data_posted_[parity] = data_completed_[parity] = 0;
    return Status();
  }

  Status put_data(int peer, int parity, const DataPut& put, std::size_t record_bytes) override {
    EPS_ASSIGN_OR_RETURN(std::optional<std::uint32_t> imm,
                         c_.signal.data_imm(peer, parity, put.channel, put.records));
    EPS_RETURN_IF_ERROR(post({peer, c_.send.id, put.local_offset, c_.recv.id, put.remote_offset,
                              static_cast<std::size_t>(put.records) * record_bytes, imm,
                              static_cast<std::uint64_t>(parity)}));
    ++data_posted_[parity];
    return Status();
  }

  Status put_signal(int peer, int parity, std::size_t local_offset, std::size_t remote_offset,
                    std::size_t bytes) override {
    EPS_ASSIGN_OR_RETURN(std::uint32_t imm, c_.signal.signal_imm(peer, parity));
    return post({peer, c_.signal_send.id, local_offset, c_.signal_recv.id, remote_offset, bytes, imm,
                 kSignalBit | static_cast<std::uint64_t>(parity)});
  }

  Status put_data_with_signal(int peer, int parity, const DataPut& put, std::size_t record_bytes) override {
    EPS_ASSIGN_OR_RETURN(std::uint32_t imm, c_.signal.signal_imm(peer, parity));
    return post({peer, c_.send.id, put.local_offset, c_.recv.id, put.remote_offset,
                 static_cast<std::size_t>(put.records) * record_bytes, imm,
                 kSignalBit | static_cast<std::uint64_t>(parity)});
  }

  Status data_puts_done(int) override { return Status(); }
  Status signal_puts_done(int) override { return Status(); }

  Status await_data_placed(int parity) override {
    return progress_until([&] { return data_completed_[parity] == data_posted_[parity]; },
                          [&] {
                            return fmt::format("local completions of {} data puts, {} seen",
                                               data_posted_[parity], data_completed_[parity]);
                          });
  }

  Status progress() override {
    for (;;) {
      EPS_ASSIGN_OR_RETURN(std::size_t n, c_.fabric.poll(completions_));
      for (std::size_t i = 0; i < n; ++i) {
        const Completion& c = completions_[i];
        if (c.kind == CompletionKind::kRemote) {
          EPS_RETURN_IF_ERROR(c_.on_immediate(c.imm));
          continue;
        }
        const auto p = static_cast<std::size_t>(c.context & 1);
        ++completed_[p];
        if ((c.context & kSignalBit) == 0) ++data_completed_[p];
      }
      if (n < completions_.size()) return Status();
    }
  }

  Status quiet() override { return c_.fabric.quiet(deadline()); }

 private:
  Deadline deadline() const { return Deadline(c_.timeout_seconds); }

  // Drives progress until `done`; at the deadline kEnvironment naming `awaited` and where().
  template <typename Done, typename Awaited>
  Status progress_until(Done done, Awaited awaited) {
    Status failure;
    EPS_RETURN_IF_ERROR(wait_until(
        deadline(),
        [&] {
          failure = progress();
          return !failure.ok() || done();
        },
        [&] { return fmt::format("{} ({})", awaited(), c_.where()); }));
    return failure;
  }

  // Posts one put, polling while the fabric pushes back (peers drain our puts only while they poll too).
  Status post(const PutOp& op) {
    Status failure;
    const Status waited = wait_until(
        deadline(),
        [&] {
          Result<bool> posted = c_.fabric.try_put(op);
          if (!posted.ok()) {
            failure = posted.status();
            return true;
          }
          if (*posted) return true;
          failure = progress();
          return !failure.ok();
        },
        [&] {
          return fmt::format("room to post a put of {} bytes to rank {} ({})", op.bytes, op.peer, c_.where());
        });
    EPS_RETURN_IF_ERROR(waited);
    EPS_RETURN_IF_ERROR(failure);
    ++posted_[op.context & 1];
    return Status();
  }

  PutContext c_;
  std::vector<Completion> completions_;
  // Per parity: puts posted and locally completed (all, and data puts only, for sender-barrier).
  std::int64_t posted_[2] = {0, 0};
  std::int64_t completed_[2] = {0, 0};
  std::int64_t data_posted_[2] = {0, 0};
  std::int64_t data_completed_[2] = {0, 0};
};

}  // namespace

std::unique_ptr<PutPath> make_fabric_put_path(const PutContext& context) {
  return std::make_unique<FabricPutPath>(context);
}

}  // namespace eps::transport
