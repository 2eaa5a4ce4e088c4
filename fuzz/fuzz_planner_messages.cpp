// The planner's message bodies (impls/layer/planner/planner.hpp, docs/eplb.md 8.6), as a peer that passed the
// MAC sends them: message_type and the four decoders. Properties: a rejected body is bad input naming a
// field; a decoded message re-encoded decodes to a message that encodes to the same text, and its type is
// the one message_type reads; only the decoder of that type accepts a body; a decoded plan request is
// answered (answer_plan_request, what the planner runs) with a reply the client's decoder accepts.
#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "impls/layer/planner/planner.hpp"

namespace {

namespace planner = eps::planner;

template <typename Message>
bool round_trips(std::string_view body, std::string_view type,
                 eps::Result<Message> (*decode)(std::string_view), std::string (*encode)(const Message&)) {
  const eps::Result<Message> message = decode(body);
  if (!message.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(message.status()), message.status().message());
    return false;
  }
  const std::string encoded = encode(*message);
  const eps::Result<Message> again = decode(encoded);
  EPS_FUZZ_CHECK(again.ok(), fmt::format("{} re-encoded is rejected: {}", type, again.status().message()));
  EPS_FUZZ_CHECK(encode(*again) == encoded, encoded);
  const eps::Result<std::string> read_type = planner::message_type(encoded);
  EPS_FUZZ_CHECK(read_type.ok() && *read_type == type, encoded);
  return true;
}

// Problems whose policy run stays within libFuzzer's -timeout (docs/eplb.md policies are polynomial in P).
bool small_problem(const planner::PlanRequest& request) {
  double cells = 0;
  for (const auto& row : request.problem.weight) cells += static_cast<double>(row.size());
  return cells * request.problem.num_replicas <= 1 << 22;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body = eps::fuzz::text_of(data, size);
  const eps::Result<std::string> type = planner::message_type(body);
  if (!type.ok()) EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(type.status()), type.status().message());
  int accepted = 0;
  if (round_trips(body, "plan", &planner::decode_plan_request, &planner::encode_plan_request)) {
    ++accepted;
    EPS_FUZZ_CHECK(type.ok() && *type == "plan", "plan decoded from another type");
    const planner::PlanRequest request = planner::decode_plan_request(body).value();
    if (small_problem(request)) {
      const planner::PlanReply reply = planner::answer_plan_request(request);
      const eps::Result<planner::PlanReply> decoded =
          planner::decode_plan_reply(planner::encode_plan_reply(reply));
      EPS_FUZZ_CHECK(decoded.ok(),
                     "the planner's reply is rejected by the client: " + decoded.status().message());
      EPS_FUZZ_CHECK(decoded->request == request.request, "reply for another request");
    }
  }
  if (round_trips(body, "placement", &planner::decode_plan_reply, &planner::encode_plan_reply)) {
    ++accepted;
    EPS_FUZZ_CHECK(type.ok() && *type == "placement", "placement decoded from another type");
  }
  if (round_trips(body, "staged", &planner::decode_staged, &planner::encode_staged)) {
    ++accepted;
    EPS_FUZZ_CHECK(type.ok() && *type == "staged", "staged decoded from another type");
  }
  if (round_trips(body, "switch", &planner::decode_switch, &planner::encode_switch)) {
    ++accepted;
    EPS_FUZZ_CHECK(type.ok() && *type == "switch", "switch decoded from another type");
  }
  EPS_FUZZ_CHECK(accepted <= 1, "one body decoded as several messages");
  return 0;
}
