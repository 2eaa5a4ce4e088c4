// The planner's frames (impls/layer/planner/planner.hpp FrameReader, docs/eplb.md 8.7), as bytes arrive from
// a TCP peer. The first byte picks the mode.
//   Even: the rest is raw bytes from an unauthenticated peer, appended in fuzzer-chosen pieces. Property: a
//   reader that failed stays failed, with bad input as its reason.
//   Odd: a sequence of frames encoded with the shared key (encode_frame), each with a counter step (0: not
//   increasing), possibly the wrong direction or one flipped byte, sent in fuzzer-chosen pieces. Properties:
//   the reader yields exactly the bodies of the leading well-formed frames, in order, and fails on the first
//   bad one (a flipped byte may also leave the reader waiting for the rest of a longer frame).
#include <vector>

#include <fmt/format.h>
#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz/fuzz_util.hpp"
#include "impls/layer/planner/planner.hpp"

namespace {

namespace planner = eps::planner;

const planner::PlannerKey& shared_key() {
  static const planner::PlannerKey key =
      planner::PlannerKey::from_text("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
          .value();
  return key;
}

// Feeds `bytes` in pieces; returns the bodies yielded and whether the reader failed.
struct Outcome {
  std::vector<std::string> bodies;
  bool failed = false;
};

Outcome feed(planner::FrameReader& reader, const std::vector<unsigned char>& bytes,
             FuzzedDataProvider& pieces) {
  Outcome outcome;
  std::size_t sent = 0;
  while (sent < bytes.size() && !outcome.failed) {
    const std::size_t piece =
        std::min<std::size_t>(bytes.size() - sent, pieces.ConsumeIntegralInRange<std::size_t>(1, 300));
    reader.append(bytes.data() + sent, piece);
    sent += piece;
    for (;;) {
      const eps::Result<std::optional<std::string>> next = reader.next();
      if (!next.ok()) {
        EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(next.status()), next.status().message());
        outcome.failed = true;
        break;
      }
      if (!next->has_value()) break;
      outcome.bodies.push_back(**next);
    }
  }
  if (outcome.failed) {
    const eps::Result<std::optional<std::string>> after = reader.next();
    EPS_FUZZ_CHECK(!after.ok(), "a failed reader recovered");
  }
  return outcome;
}

void raw_bytes(FuzzedDataProvider& provider) {
  const std::vector<unsigned char> bytes =
      provider.ConsumeBytes<unsigned char>(provider.ConsumeIntegralInRange<std::size_t>(0, 4096));
  planner::FrameReader reader(shared_key(), planner::Direction::kToPlanner);
  (void)feed(reader, bytes, provider);
}

void encoded_frames(FuzzedDataProvider& provider) {
  std::vector<unsigned char> stream;
  std::vector<std::string> expected;  // bodies of the leading well-formed frames
  bool broken = false;                // a bad frame was added; nothing after it may be yielded
  bool flipped = false;               // the bad frame has a flipped byte (any outcome but a wrong body)
  std::uint64_t counter = 0;
  const int frames = provider.ConsumeIntegralInRange(1, 8);
  for (int f = 0; f < frames; ++f) {
    const std::uint64_t step = provider.ConsumeIntegralInRange<std::uint64_t>(0, 3);
    const bool wrong_direction = provider.ConsumeIntegralInRange(0, 15) == 0;
    const bool flip = provider.ConsumeIntegralInRange(0, 7) == 0;
    const std::string body = provider.ConsumeRandomLengthString(512);
    const std::uint64_t frame_counter = counter + step;
    const auto frame = planner::encode_frame(
        shared_key(), wrong_direction ? planner::Direction::kFromPlanner : planner::Direction::kToPlanner,
        frame_counter, body);
    EPS_FUZZ_CHECK(frame.ok(), frame.status().message());
    std::vector<unsigned char> bytes = *frame;
    if (flip)
      bytes[provider.ConsumeIntegralInRange<std::size_t>(0, bytes.size() - 1)] ^=
          provider.ConsumeIntegralInRange<unsigned char>(1, 255);
    stream.insert(stream.end(), bytes.begin(), bytes.end());
    if (broken) continue;
    if (step == 0 || wrong_direction || flip) {
      broken = true;
      flipped = flip;  // a flipped length may leave the reader waiting instead
      continue;
    }
    counter = frame_counter;
    expected.push_back(body);
  }
  planner::FrameReader reader(shared_key(), planner::Direction::kToPlanner);
  const Outcome outcome = feed(reader, stream, provider);
  EPS_FUZZ_CHECK(outcome.bodies == expected,
                 fmt::format("{} bodies yielded, {} expected", outcome.bodies.size(), expected.size()));
  if (broken && !flipped) EPS_FUZZ_CHECK(outcome.failed, "a bad counter or direction was accepted");
  if (!broken) EPS_FUZZ_CHECK(!outcome.failed && !reader.mid_frame(), "well-formed frames were refused");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  FuzzedDataProvider provider(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    raw_bytes(provider);
  } else {
    encoded_frames(provider);
  }
  return 0;
}
