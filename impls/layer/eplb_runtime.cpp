#include "impls/layer/eplb_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <utility>

#include <fmt/format.h>

#include "impls/layer/planner/planner.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "reference/eplb/policy.hpp"
#include "reference/expert/expert_kernel.hpp"

namespace eps::layer {

namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status boundary_error(std::string message) { return Status(StatusCode::kEnvironment, std::move(message)); }

// The slot a moved expert is copied from (docs/eplb.md 8.5): a slot of `old` holding `expert` on the
// destination's rank, else on its node, else the lowest.
int source_slot(const eplb::Placement& old, int layer, int expert, int destination, int ranks_per_node) {
  const int dest_rank = old.rank_of_slot(destination);
  int best = -1;
  int best_class = 3;
  for (int j = 0; j < old.replica_count(layer, expert); ++j) {
    const int s = old.replica_slot(layer, expert, j);
    const int r = old.rank_of_slot(s);
    const int klass = r == dest_rank ? 0 : (r / ranks_per_node == dest_rank / ranks_per_node ? 1 : 2);
    if (klass < best_class || (klass == best_class && s < best)) {
      best = s;
      best_class = klass;
    }
  }
  return best;
}

// The number of values of `got` that differ in bits from `want` across w1, w3 and w2.
std::int64_t differing_values(const ExpertWeights& got, const ExpertWeights& want) {
  std::int64_t n = 0;
  const auto count = [&](const std::vector<bf16>& a, const std::vector<bf16>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) n += i >= b.size() || a[i].bits != b[i].bits;
  };
  count(got.w1, want.w1);
  count(got.w3, want.w3);
  count(got.w2, want.w2);
  return n;
}

// How many values of an arrived expert differ from the weights of (seed, layer, expert) (docs/layer.md 4.4).
Result<std::int64_t> differences_from_generated(const LayerSpec& spec, int layer, int expert,
                                                const ExpertWeights& got) {
  EPS_ASSIGN_OR_RETURN(
      const ExpertWeights want,
      generate_expert_weights(spec.seed, static_cast<std::uint32_t>(layer), ExpertRole::kRouted,
                              static_cast<std::uint32_t>(expert), {spec.hidden, spec.ffn}));
  return differing_values(got, want);
}

}  // namespace

// Rank 0's planner: the connection, and what it answered that the ranks have not acted on yet.
struct EplbRuntime::Planner {
  std::unique_ptr<planner::PlannerServer> server;  // the planner thread (no planner_address)
  std::unique_ptr<planner::PlannerClient> client;
  std::uint64_t next_request = 1;
  std::uint64_t outstanding = 0;  // requested and not switched to yet
  std::int64_t requested_after_step = -1;
  int requested_window = -1;
  std::optional<planner::PlanReply> reply;
  std::optional<planner::SwitchNotice> switch_notice;
};

// The plan being staged: every move of this rank (docs/eplb.md 8.7).
struct EplbRuntime::Moves {
  struct Arrival {  // a slot of this rank that gains an expert
    int layer = 0;
    int local = 0;
    int expert = 0;
    int from_rank = 0;
    ExpertWeights weights;
    MPI_Request requests[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    std::future<Result<std::int64_t>>
        check;  // values differing from the generated weights, off the step path
    bool staged = false;
  };
  std::uint64_t request = 0;
  eplb::Placement next;
  std::vector<Arrival> arrivals;
  std::vector<MPI_Request> sends;
  std::vector<DistributedLayer::StagedSlot> staged;
  std::vector<ExpertWeights> staged_weights;  // parallel to staged
  bool staged_all = false;
  bool notified = false;
  Deadline deadline;

  ~Moves() {
    for (Arrival& a : arrivals) {
      for (MPI_Request& r : a.requests) {
        if (r != MPI_REQUEST_NULL) MPI_Cancel(&r), MPI_Request_free(&r);
      }
    }
    for (MPI_Request& r : sends) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
  }
};

EplbRuntime::EplbRuntime(const LayerSpec& spec, const EplbConfig& config, transport::Transport& transport,
                         device::Device& device, int rank)
    : spec_(spec),
      config_(config),
      transport_(transport),
      device_(device),
      rank_(rank),
      ranks_(spec.num_ranks()),
      ranks_per_node_(spec.ranks_per_node) {}

EplbRuntime::~EplbRuntime() {
  moves_.reset();
  planner_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Result<std::unique_ptr<EplbRuntime>> EplbRuntime::create(const LayerSpec& spec, const EplbConfig& config,
                                                         transport::Transport& transport,
                                                         device::Device& device, int rank) {
  if (spec.layout == transport::Layout::kHtRankMajor) {
    return invalid_argument("layout",
                            "EPLB needs ll or ht-expert-major: ht-rank-major combines with the ht-rank tree, "
                            "which depends on where each expert lives");
  }
  if (config.lb_interval < 1 || config.lb_interval > kMaxLbInterval) {
    return out_of_range("lb_interval", 1, kMaxLbInterval, config.lb_interval);
  }
  if (!(config.timeout_seconds > 0)) return invalid_argument("timeout", "must be > 0 s");
  if (!(config.planner_reply_delay_seconds >= 0)) return invalid_argument("planner_delay", "must be >= 0 s");
  std::unique_ptr<EplbRuntime> runtime(new EplbRuntime(spec, config, transport, device, rank));
  EPS_RETURN_IF_ERROR(runtime->start());
  return runtime;
}

Status EplbRuntime::start() {
  EPS_RETURN_IF_ERROR(check_policy());
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<DistributedLayer> layer,
                       DistributedLayer::create(spec_, transport_, device_, rank_));
  layer_ = std::move(layer);
  const Deadline deadline(config_.timeout_seconds);
  EPS_ASSIGN_OR_RETURN(comm_, mpi::comm_dup(transport_.config().comm, deadline));
  const eplb::Placement& placement = layer_->placement();
  const int local = placement.slots_per_rank();
  slot_weights_.resize(static_cast<std::size_t>(spec_.num_layers));
  for (int layer = 0; layer < spec_.num_layers; ++layer) {
    for (int l = 0; l < local; ++l) {
      EPS_ASSIGN_OR_RETURN(
          ExpertWeights w,
          generate_expert_weights(spec_.seed, static_cast<std::uint32_t>(layer), ExpertRole::kRouted,
                                  static_cast<std::uint32_t>(placement.slot_expert(layer, rank_ * local + l)),
                                  {spec_.hidden, spec_.ffn}));
      slot_weights_[layer].push_back(std::move(w));
    }
  }
  window_load_.assign(static_cast<std::size_t>(spec_.num_layers),
                      std::vector<std::int64_t>(static_cast<std::size_t>(spec_.num_experts), 0));
  window_rows_.assign(static_cast<std::size_t>(spec_.num_layers), 0);
  // Rank 0 connects; every rank learns whether it could.
  const Status connected = rank_ == 0 ? connect_planner() : Status();
  int failed = connected.ok() ? 0 : 1;
  EPS_RETURN_IF_ERROR(
      mpi::allreduce_in_place(&failed, 1, MPI_INT, MPI_MAX, comm_, deadline, "planner setup"));
  if (!connected.ok()) return connected;
  if (failed) return boundary_error("the EPLB planner could not be reached (rank 0 reports why)");
  return Status();
}

// The policy must accept the run's shape (with zero loads) before anything runs: a bad combination (greedy
// with replicas, groups not dividing E) is a configuration error on every rank, not a failure mid-run.
Status EplbRuntime::check_policy() const {
  EPS_ASSIGN_OR_RETURN(const eplb::EplbPolicy* policy, eplb::find_eplb_policy(config_.policy));
  eplb::EplbProblem problem;
  problem.weight.assign(static_cast<std::size_t>(spec_.num_layers),
                        std::vector<double>(static_cast<std::size_t>(spec_.num_experts), 0.0));
  problem.traffic.assign(
      static_cast<std::size_t>(spec_.num_layers),
      std::vector<std::vector<double>>(static_cast<std::size_t>(ranks_), problem.weight[0]));
  problem.num_replicas = spec_.slots();
  problem.num_groups = config_.num_groups;
  problem.num_nodes = ranks_ / ranks_per_node_;
  problem.num_ranks = ranks_;
  problem.max_move = config_.max_move;
  problem.threshold = config_.threshold;
  const Result<eplb::EplbPlan> plan = policy->plan(problem);
  if (!plan.ok()) {
    return invalid_argument("policy", "{} cannot plan this layer: {}", config_.policy,
                            plan.status().message());
  }
  return Status();
}

Status EplbRuntime::connect_planner() {
  planner_ = std::make_unique<Planner>();
  const bool key_given = std::getenv(std::string(planner::kKeyVariable).c_str()) != nullptr;
  std::pair<std::string, int> address{"127.0.0.1", 0};
  if (!config_.planner_address.empty()) {
    EPS_ASSIGN_OR_RETURN(address, planner::parse_address("planner", config_.planner_address));
    if (!key_given) {
      return invalid_argument(planner::kKeyVariable, "must hold the planner's key to talk to {}",
                              config_.planner_address);
    }
  }
  EPS_ASSIGN_OR_RETURN(planner::PlannerKey key,
                       key_given ? planner::PlannerKey::from_environment() : planner::PlannerKey::random());
  if (config_.planner_address.empty()) {
    planner::PlannerOptions options;
    options.reply_delay_seconds = config_.planner_reply_delay_seconds;
    options.on_log = [](const std::string&) {};  // rank 0's own thread: its rejections stay in log_lines()
    EPS_ASSIGN_OR_RETURN(planner_->server, planner::PlannerServer::start(options, key));
    address.second = planner_->server->port();
  }
  EPS_ASSIGN_OR_RETURN(planner_->client,
                       planner::PlannerClient::connect(address.first, address.second, std::move(key),
                                                       config_.timeout_seconds));
  return Status();
}

const eplb::Placement& EplbRuntime::placement() const { return layer_->placement(); }

LayerSpec EplbRuntime::spec_at(std::int64_t step) const {
  LayerSpec s = spec_;
  s.step = static_cast<int>(step);
  return s;
}

Result<std::vector<bf16>> EplbRuntime::output() const { return layer_->output(); }

Result<EplbStepRecord> EplbRuntime::step() {
  EplbStepRecord record;
  record.step = next_step_;
  record.plan = plan_;
  layer_->set_step(static_cast<int>(next_step_));
  const double start = now_us();
  EPS_ASSIGN_OR_RETURN(record.layers, layer_->run());
  boundary_start_us_ = now_us();
  record.stack_us = boundary_start_us_ - start;
  EPS_RETURN_IF_ERROR(boundary(record));
  record.boundary_us = now_us() - boundary_start_us_;
  ++next_step_;
  return record;
}

// The control word every boundary agrees on: rank 0's news and how many ranks have staged the plan.
struct ControlWord {
  std::int64_t new_plan = 0;        // request id whose placement rank 0 will broadcast now
  std::int64_t switch_request = 0;  // request id to switch to before the next step
  std::int64_t staged_ranks = 0;
  std::int64_t failed = 0;  // rank 0 cannot go on (planner lost or the policy refused)
};

Status EplbRuntime::boundary(EplbStepRecord& record) {
  for (int layer = 0; layer < spec_.num_layers; ++layer) {
    const StepRecord& r = record.layers[layer];
    for (int e = 0; e < spec_.num_experts; ++e) window_load_[layer][e] += r.expert_load[e];
    window_rows_[layer] += r.expert_rows;
  }
  if (++window_steps_ == config_.lb_interval) EPS_RETURN_IF_ERROR(close_window(record));
  Status planner_status;
  if (rank_ == 0) planner_status = poll_planner();
  if (moves_) EPS_RETURN_IF_ERROR(progress_moves());

  ControlWord word;
  if (rank_ == 0 && planner_status.ok()) {
    if (planner_->reply && !moves_) {
      word.new_plan = static_cast<std::int64_t>(planner_->reply->request);
      if (!planner_->reply->placement)
        planner_status = invalid_argument("policy", "the planner refused plan {}: {}",
                                          planner_->reply->request, planner_->reply->error);
    }
    const std::optional<planner::SwitchNotice>& notice = planner_->switch_notice;
    if (notice && notice->step <= record.step + 1)
      word.switch_request = static_cast<std::int64_t>(notice->request);
  }
  word.failed = planner_status.ok() ? 0 : 1;
  word.staged_ranks = moves_ && moves_->staged_all ? 1 : 0;
  const Deadline deadline(config_.timeout_seconds);
  EPS_RETURN_IF_ERROR(
      mpi::allreduce_in_place(&word, 4, MPI_INT64_T, MPI_SUM, comm_, deadline,
                              fmt::format("the EPLB step boundary after step {}", record.step)));
  if (word.failed) {
    if (!planner_status.ok()) return planner_status;
    return boundary_error("the EPLB planner failed (rank 0 reports why)");
  }
  if (word.new_plan != 0) {
    EPS_RETURN_IF_ERROR(adopt_plan(static_cast<std::uint64_t>(word.new_plan)));
    rebalances_.back().adopted_after_step = record.step;
  }
  if (moves_ && word.staged_ranks == ranks_ && !moves_->notified) {
    moves_->notified = true;
    rebalances_.back().staged_after_step = record.step;
    if (rank_ == 0) EPS_RETURN_IF_ERROR(planner_->client->send_staged({moves_->request, record.step}));
  }
  if (word.switch_request != 0) {
    if (!moves_ || moves_->request != static_cast<std::uint64_t>(word.switch_request) || !moves_->notified) {
      return boundary_error(
          fmt::format("the planner announced a switch to plan {} that is not staged", word.switch_request));
    }
    EPS_RETURN_IF_ERROR(switch_plan(record));
  }
  return Status();
}

// Sums the window's loads over the ranks (keeping each rank's row: mindie-a2a's traffic) and, on rank 0,
// asks for a plan unless one is on its way.
Status EplbRuntime::close_window(EplbStepRecord& record) {
  const std::size_t layers = static_cast<std::size_t>(spec_.num_layers);
  const std::size_t experts = static_cast<std::size_t>(spec_.num_experts);
  const std::size_t ranks = static_cast<std::size_t>(ranks_);
  // [R][layers][E] loads, then [R][layers] rows; this rank fills its own part.
  std::vector<double> all(ranks * layers * experts + ranks * layers, 0.0);
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t e = 0; e < experts; ++e) {
      all[(rank_ * layers + l) * experts + e] = static_cast<double>(window_load_[l][e]);
    }
    all[ranks * layers * experts + rank_ * layers + l] = static_cast<double>(window_rows_[l]);
  }
  EPS_RETURN_IF_ERROR(mpi::allreduce_in_place(all.data(), static_cast<int>(all.size()), MPI_DOUBLE, MPI_SUM,
                                              comm_, Deadline(config_.timeout_seconds),
                                              "the EPLB load window"));
  WindowRecord w;
  w.index = static_cast<int>(windows_.size());
  w.last_step = record.step;
  w.plan = plan_;
  w.loads.assign(layers, std::vector<double>(experts, 0.0));
  w.rank_rows.assign(layers, std::vector<std::int64_t>(ranks, 0));
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t l = 0; l < layers; ++l) {
      for (std::size_t e = 0; e < experts; ++e) w.loads[l][e] += all[(r * layers + l) * experts + e];
      w.rank_rows[l][r] = static_cast<std::int64_t>(all[ranks * layers * experts + r * layers + l]);
    }
  }
  EPS_ASSIGN_OR_RETURN(w.realized, eplb::balancedness(layer_->placement(), w.loads));
  windows_.push_back(std::move(w));
  record.window_end = true;
  window_steps_ = 0;
  for (auto& row : window_load_) std::fill(row.begin(), row.end(), 0);
  std::fill(window_rows_.begin(), window_rows_.end(), 0);
  if (rank_ != 0 || planner_->outstanding != 0) return Status();
  eplb::EplbProblem problem;
  problem.weight = windows_.back().loads;
  if (config_.policy == "mindie-a2a") {  // traffic[l][d][e]: the tokens rank d sent to expert e (a2a only)
    problem.traffic.assign(layers, std::vector<std::vector<double>>(ranks, std::vector<double>(experts)));
    for (std::size_t r = 0; r < ranks; ++r) {
      for (std::size_t l = 0; l < layers; ++l) {
        for (std::size_t e = 0; e < experts; ++e)
          problem.traffic[l][r][e] = all[(r * layers + l) * experts + e];
      }
    }
  }
  problem.num_replicas = spec_.slots();
  problem.num_groups = config_.num_groups;
  problem.num_nodes = ranks_ / ranks_per_node_;
  problem.num_ranks = ranks_;
  problem.current = layer_->placement();
  problem.max_move = config_.max_move;
  problem.threshold = config_.threshold;
  planner::PlanRequest request{planner_->next_request++, config_.policy, record.step, std::move(problem)};
  planner_->outstanding = request.request;
  planner_->requested_after_step = record.step;
  planner_->requested_window = windows_.back().index;
  return planner_->client->send_plan(request);
}

// Rank 0: takes every reply that has arrived, without waiting.
Status EplbRuntime::poll_planner() {
  for (;;) {
    EPS_ASSIGN_OR_RETURN(std::optional<planner::PlannerClient::Reply> reply, planner_->client->poll());
    if (!reply) return Status();
    if (reply->placement) {
      if (reply->placement->request != planner_->outstanding || planner_->reply) {
        return boundary_error(fmt::format("the planner answered request {} while {} was outstanding",
                                          reply->placement->request, planner_->outstanding));
      }
      planner_->reply = std::move(reply->placement);
    }
    if (reply->switch_notice) planner_->switch_notice = reply->switch_notice;
  }
}

// Every rank receives the placement of plan `request` from rank 0, records the rebalance and starts the
// moves.
Status EplbRuntime::adopt_plan(std::uint64_t request) {
  const eplb::Placement& old = layer_->placement();
  const std::size_t n = static_cast<std::size_t>(old.num_layers) * old.num_slots;
  // phy2log, then the replica index of every slot, then [requested step, window, planner ns].
  std::vector<std::int64_t> message(2 * n + 3, 0);
  if (rank_ == 0) {
    const eplb::Placement& next = *planner_->reply->placement;
    if (next.num_layers != old.num_layers || next.num_slots != old.num_slots ||
        next.num_experts != old.num_experts || next.num_ranks != old.num_ranks) {
      return boundary_error(fmt::format("the planner's placement for plan {} has another shape", request));
    }
    const std::vector<std::vector<int>> phy = eplb::phy2log_rows(next);
    const std::vector<std::vector<int>> replica = eplb::replica_index_rows(next);
    for (std::size_t l = 0; l < phy.size(); ++l) {
      for (std::size_t p = 0; p < phy[l].size(); ++p) {
        message[l * old.num_slots + p] = phy[l][p];
        message[n + l * old.num_slots + p] = replica[l][p];
      }
    }
    message[2 * n] = planner_->requested_after_step;
    message[2 * n + 1] = planner_->requested_window;
    message[2 * n + 2] = static_cast<std::int64_t>(planner_->reply->planner_us * 1000.0);
    planner_->reply.reset();
  }
  MPI_Request bcast = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Ibcast(message.data(), static_cast<int>(message.size()), MPI_INT64_T, 0, comm_, &bcast));
  EPS_RETURN_IF_ERROR(mpi::wait(&bcast, Deadline(config_.timeout_seconds), [&] {
    return fmt::format("the placement of EPLB plan {} from rank 0", request);
  }));
  std::vector<std::vector<int>> phy(static_cast<std::size_t>(old.num_layers)), replica(phy.size());
  for (std::size_t l = 0; l < phy.size(); ++l) {
    for (int p = 0; p < old.num_slots; ++p) {
      phy[l].push_back(static_cast<int>(message[l * old.num_slots + p]));
      replica[l].push_back(static_cast<int>(message[n + l * old.num_slots + p]));
    }
  }
  auto moves = std::make_unique<Moves>();
  moves->request = request;
  moves->deadline = Deadline(config_.timeout_seconds);
  EPS_ASSIGN_OR_RETURN(moves->next, eplb::make_placement(phy, replica, old.num_experts, old.num_ranks));
  RebalanceRecord rebalance;
  rebalance.request = request;
  rebalance.requested_after_step = message[2 * n];
  rebalance.planner_us = static_cast<double>(message[2 * n + 2]) / 1000.0;
  EPS_ASSIGN_OR_RETURN(rebalance.moved, eplb::moved_experts(old, moves->next, ranks_per_node_));
  rebalance.moved_bytes =
      eplb::moved_bytes(rebalance.moved, 3.0 * spec_.hidden * static_cast<double>(spec_.ffn) * sizeof(bf16));
  const auto window = static_cast<std::size_t>(message[2 * n + 1]);
  if (window < windows_.size()) {
    EPS_ASSIGN_OR_RETURN(rebalance.predicted, eplb::balancedness(moves->next, windows_[window].loads));
  }
  rebalances_.push_back(std::move(rebalance));
  moves_ = std::move(moves);
  EPS_RETURN_IF_ERROR(post_moves());
  if (config_.on_event) config_.on_event(EplbConfig::Event::kMovesPosted);
  return progress_moves();
}

// Posts this rank's sends and receives in the order of the global move list (layer, then destination slot),
// the same on every rank, so MPI's in-order matching pairs them. A move within one rank is staged at once.
Status EplbRuntime::post_moves() {
  const eplb::Placement& old = layer_->placement();
  const eplb::Placement& next = moves_->next;
  const int local = old.slots_per_rank();
  const auto count = static_cast<int>(spec_.hidden * std::int64_t{spec_.ffn});
  for (int layer = 0; layer < old.num_layers; ++layer) {
    for (int p = 0; p < old.num_slots; ++p) {
      const int expert = next.slot_expert(layer, p);
      if (old.slot_expert(layer, p) == expert) continue;
      const int from = source_slot(old, layer, expert, p, ranks_per_node_);
      const int to_rank = old.rank_of_slot(p);
      const int from_rank = old.rank_of_slot(from);
      if (from_rank == rank_ && to_rank != rank_) {
        const ExpertWeights& w = slot_weights_[layer][from - rank_ * local];
        for (const std::vector<bf16>* m : {&w.w1, &w.w3, &w.w2}) {
          moves_->sends.push_back(MPI_REQUEST_NULL);
          EPS_MPI_CHECK(MPI_Isend(m->data(), count, MPI_UINT16_T, to_rank, 0, comm_, &moves_->sends.back()));
        }
      }
      if (to_rank != rank_) continue;
      Moves::Arrival a;
      a.layer = layer;
      a.local = p - rank_ * local;
      a.expert = expert;
      a.from_rank = from_rank;
      a.weights.shape = {spec_.hidden, spec_.ffn};
      if (from_rank == rank_) {
        a.weights = slot_weights_[layer][from - rank_ * local];
      } else {
        for (std::vector<bf16>* m : {&a.weights.w1, &a.weights.w3, &a.weights.w2}) m->resize(count);
      }
      moves_->arrivals.push_back(std::move(a));
    }
  }
  // Receive buffers are final once the vector stops growing.
  for (Moves::Arrival& a : moves_->arrivals) {
    if (a.from_rank == rank_) continue;
    std::vector<bf16>* parts[3] = {&a.weights.w1, &a.weights.w3, &a.weights.w2};
    for (int i = 0; i < 3; ++i) {
      EPS_MPI_CHECK(MPI_Irecv(parts[i]->data(), count, MPI_UINT16_T, a.from_rank, 0, comm_, &a.requests[i]));
    }
  }
  return Status();
}

// Checks every arrival that completed on a thread of its own (regenerating an expert costs about as much as
// running it, so the check overlaps the next steps), stages every checked one, and sets staged_all once every
// arrival is staged and every send finished.
Status EplbRuntime::progress_moves() {
  for (std::size_t i = 0; i < moves_->arrivals.size(); ++i) {
    Moves::Arrival& a = moves_->arrivals[i];
    if (a.staged) continue;
    if (!a.check.valid()) {
      int done = 0;
      EPS_MPI_CHECK(MPI_Testall(3, a.requests, &done, MPI_STATUSES_IGNORE));
      if (done) {
        a.check = std::async(std::launch::async, [&spec = spec_, &a] {
          return differences_from_generated(spec, a.layer, a.expert, a.weights);
        });
      }
    }
    if (a.check.valid() && a.check.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      EPS_RETURN_IF_ERROR(stage_arrival(static_cast<int>(i)));
    }
  }
  int sent = 1;
  if (!moves_->sends.empty()) {
    EPS_MPI_CHECK(MPI_Testall(static_cast<int>(moves_->sends.size()), moves_->sends.data(), &sent,
                              MPI_STATUSES_IGNORE));
  }
  const bool all = std::all_of(moves_->arrivals.begin(), moves_->arrivals.end(),
                               [](const Moves::Arrival& a) { return a.staged; });
  moves_->staged_all = all && sent;
  if (!moves_->staged_all && moves_->deadline.expired()) {
    for (const Moves::Arrival& a : moves_->arrivals) {
      if (a.staged) continue;
      return boundary_error(
          fmt::format("timed out after {:.3f} s waiting for EPLB plan {}'s weight moves: layer {} slot {} "
                      "(expert {}) from "
                      "rank {} has not arrived on rank {}",
                      moves_->deadline.budget_seconds(), moves_->request, a.layer, a.local, a.expert,
                      a.from_rank, rank_));
    }
    return boundary_error(
        fmt::format("timed out after {:.3f} s waiting for EPLB plan {}'s weight sends from rank {}",
                    moves_->deadline.budget_seconds(), moves_->request, rank_));
  }
  return Status();
}

// A checked arrival is uploaded to the device for the switch; one that differs fails the run.
Status EplbRuntime::stage_arrival(int index) {
  Moves::Arrival& a = moves_->arrivals[static_cast<std::size_t>(index)];
  EPS_ASSIGN_OR_RETURN(const std::int64_t wrong, a.check.get());
  if (wrong != 0) {
    return Status(
        StatusCode::kCheckFailed,
        fmt::format("EPLB plan {}: the weights of expert {} (layer {}) that rank {} received from rank "
                    "{} differ from the generated ones in {} values",
                    moves_->request, a.expert, a.layer, rank_, a.from_rank, wrong));
  }
  EPS_ASSIGN_OR_RETURN(device::DeviceExpert expert, device::DeviceExpert::create(device_, a.weights));
  moves_->staged.push_back({a.layer, a.local, std::move(expert)});
  moves_->staged_weights.push_back(std::move(a.weights));
  a.staged = true;
  return Status();
}

Status EplbRuntime::switch_plan(EplbStepRecord& record) {
  EPS_RETURN_IF_ERROR(device_.synchronize());
  for (std::size_t i = 0; i < moves_->staged.size(); ++i) {
    const DistributedLayer::StagedSlot& s = moves_->staged[i];
    slot_weights_[s.layer][s.local] = std::move(moves_->staged_weights[i]);
  }
  EPS_RETURN_IF_ERROR(layer_->switch_placement(moves_->next, std::move(moves_->staged)));
  plan_ = moves_->request;
  moves_.reset();
  if (rank_ == 0) {
    planner_->outstanding = 0;
    planner_->switch_notice.reset();
  }
  RebalanceRecord& rebalance = rebalances_.back();
  rebalance.switch_step = record.step + 1;
  rebalance.switch_us = now_us() - boundary_start_us_;
  record.switched = true;
  if (config_.on_event) config_.on_event(EplbConfig::Event::kSwitched);
  return Status();
}

}  // namespace eps::layer
