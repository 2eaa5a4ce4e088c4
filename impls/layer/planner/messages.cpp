// The JSON messages of the planner protocol (planner.hpp) and the planner's answer to a plan request.
#include <chrono>
#include <limits>

#include "impls/layer/planner/eplb_json.hpp"
#include "impls/layer/planner/planner.hpp"

namespace eps::planner {
namespace {

constexpr std::int64_t kMaxId = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMaxStep = kMaxId - 1;  // so that a switch step (staged step + 1) fits
constexpr std::int64_t kMaxCount = 1 << 24;

// Invalid UTF-8 (it could only come from a policy's error text) is replaced rather than thrown on.
std::string to_body(const Json& message) {
  return message.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<Json> parse_object(std::string_view body) {
  Json message = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return invalid_argument("body", "not valid JSON ({} bytes)", body.size());
  if (!message.is_object())
    return invalid_argument("body", "expected a JSON object, got {}", message.type_name());
  return message;
}

// The body as an object of type `type` holding only `known` members.
Status expect_message(const JsonFields& fields, std::string_view type,
                      const std::vector<std::string>& known) {
  EPS_ASSIGN_OR_RETURN(std::string actual, fields.string("type"));
  if (actual != type) return invalid_argument("type", "expected \"{}\", got \"{}\"", type, actual);
  return fields.only_known(known, fmt::format("a {} message", type));
}

Result<std::uint64_t> request_of(const JsonFields& fields) {
  EPS_ASSIGN_OR_RETURN(std::int64_t request, fields.integer("request", 1, kMaxId));
  return static_cast<std::uint64_t>(request);
}

// Every decoder runs inside this: a JSON exception the checks did not foresee is still a bad body.
template <typename Decode>
auto guarded(std::string_view body, Decode decode) -> decltype(decode(std::declval<const Json&>())) {
  try {
    EPS_ASSIGN_OR_RETURN(const Json message, parse_object(body));
    return decode(message);
  } catch (const Json::exception& e) {
    return invalid_argument("body", "{}", e.what());
  }
}

Result<eplb::EplbProblem> problem_of(const JsonFields& message) {
  EPS_ASSIGN_OR_RETURN(const Json* value, message.member("problem"));
  const JsonFields fields(*value, "problem");
  EPS_RETURN_IF_ERROR(fields.expect_object());
  EPS_RETURN_IF_ERROR(fields.only_known(eplb_problem_fields(), "the problem"));
  EPS_ASSIGN_OR_RETURN(eplb::EplbProblem problem, read_eplb_problem(fields));
  const Status valid = eplb::validate_problem(problem);
  if (!valid.ok()) return Status(valid.code(), "problem." + valid.message());
  return problem;
}

Result<eplb::Placement> placement_of(const Json& message) {
  const JsonFields fields(message, "");
  EPS_ASSIGN_OR_RETURN(std::int64_t experts, fields.integer("num_experts", 1, kMaxCount));
  EPS_ASSIGN_OR_RETURN(std::int64_t ranks, fields.integer("num_ranks", 1, kMaxCount));
  return read_placement_rows(message, "", static_cast<int>(experts), static_cast<int>(ranks));
}

// staged and switch share a shape.
template <typename Notice>
Result<Notice> decode_notice(std::string_view body, std::string_view type) {
  return guarded(body, [type](const Json& message) -> Result<Notice> {
    const JsonFields fields(message, "");
    EPS_RETURN_IF_ERROR(expect_message(fields, type, {"type", "request", "step"}));
    Notice notice;
    EPS_ASSIGN_OR_RETURN(notice.request, request_of(fields));
    EPS_ASSIGN_OR_RETURN(notice.step, fields.integer("step", 0, type == "switch" ? kMaxId : kMaxStep));
    return notice;
  });
}

}  // namespace

std::string encode_plan_request(const PlanRequest& message) {
  return to_body({{"type", "plan"},
                  {"request", message.request},
                  {"policy", message.policy},
                  {"step", message.step},
                  {"problem", eplb_problem_json(message.problem)}});
}

std::string encode_plan_reply(const PlanReply& message) {
  Json out = {{"type", "placement"}, {"request", message.request}, {"planner_us", message.planner_us}};
  if (message.placement) {
    out.update(placement_rows_json(*message.placement));
    out["num_experts"] = message.placement->num_experts;
    out["num_ranks"] = message.placement->num_ranks;
  } else {
    out["error"] = message.error;
  }
  return to_body(out);
}

std::string encode_staged(const StagedNotice& message) {
  return to_body({{"type", "staged"}, {"request", message.request}, {"step", message.step}});
}

std::string encode_switch(const SwitchNotice& message) {
  return to_body({{"type", "switch"}, {"request", message.request}, {"step", message.step}});
}

Result<std::string> message_type(std::string_view body) {
  return guarded(body, [](const Json& message) -> Result<std::string> {
    return JsonFields(message, "").choice("type", {"plan", "placement", "staged", "switch"});
  });
}

Result<PlanRequest> decode_plan_request(std::string_view body) {
  return guarded(body, [](const Json& message) -> Result<PlanRequest> {
    const JsonFields fields(message, "");
    EPS_RETURN_IF_ERROR(expect_message(fields, "plan", {"type", "request", "policy", "step", "problem"}));
    PlanRequest request;
    EPS_ASSIGN_OR_RETURN(request.request, request_of(fields));
    EPS_ASSIGN_OR_RETURN(request.policy, fields.choice("policy", eplb::eplb_policy_names()));
    EPS_ASSIGN_OR_RETURN(request.step, fields.integer("step", 0, kMaxStep));
    EPS_ASSIGN_OR_RETURN(request.problem, problem_of(fields));
    return request;
  });
}

Result<PlanReply> decode_plan_reply(std::string_view body) {
  return guarded(body, [](const Json& message) -> Result<PlanReply> {
    const JsonFields fields(message, "");
    const bool refused = fields.has("error");
    const std::vector<std::string> known =
        refused ? std::vector<std::string>{"type", "request", "planner_us", "error"}
                : std::vector<std::string>{"type",      "request", "planner_us",   "num_experts",
                                           "num_ranks", "phy2log", "replica_index"};
    EPS_RETURN_IF_ERROR(expect_message(fields, "placement", known));
    PlanReply reply;
    EPS_ASSIGN_OR_RETURN(reply.request, request_of(fields));
    EPS_ASSIGN_OR_RETURN(reply.planner_us, fields.number("planner_us", 0.0, 1e300));
    if (refused) {
      EPS_ASSIGN_OR_RETURN(reply.error, fields.string("error"));
      if (reply.error.empty()) return invalid_argument("error", "must not be empty");
      return reply;
    }
    EPS_ASSIGN_OR_RETURN(reply.placement, placement_of(message));
    return reply;
  });
}

Result<StagedNotice> decode_staged(std::string_view body) {
  return decode_notice<StagedNotice>(body, "staged");
}

Result<SwitchNotice> decode_switch(std::string_view body) {
  return decode_notice<SwitchNotice>(body, "switch");
}

PlanReply answer_plan_request(const PlanRequest& request) {
  PlanReply reply;
  reply.request = request.request;
  const Result<const eplb::EplbPolicy*> policy = eplb::find_eplb_policy(request.policy);
  if (!policy.ok()) {
    reply.error = policy.status().message();
    return reply;
  }
  const auto start = std::chrono::steady_clock::now();
  Result<eplb::EplbPlan> plan = (*policy)->plan(request.problem);
  reply.planner_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (plan.ok()) {
    reply.placement = std::move(plan->placement);
  } else {
    // The reply's decoder insists on a non-empty error, so even a policy without words is named.
    reply.error = plan.status().message().empty() ? fmt::format("policy {} failed", request.policy)
                                                  : plan.status().message();
  }
  return reply;
}

}  // namespace eps::planner
