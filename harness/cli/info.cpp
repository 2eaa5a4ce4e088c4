#include "harness/cli/info.hpp"
#include "harness/cli/command_start.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "harness/platform/platform.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "perf/bench/presets.hpp"
#include "reference/common/version.hpp"

namespace eps {
namespace {

std::string list_or_note(const std::vector<std::string>& items, const std::string& note) {
  return items.empty() ? note : fmt::format("{}", fmt::join(items, ", "));
}

std::string node_block(const Platform& p) {
  const NodePlatform& n = p.node;
  const NodeTopology& t = n.topology;
  std::string out = fmt::format("#  {:<16} {}\n", "cpu", n.cpu_model);
  out += fmt::format("#  {:<16} {:.1f} GiB\n", "memory", static_cast<double>(n.memory_bytes) / (1ULL << 30));
  out +=
      n.topology_note.empty()
          ? fmt::format("#  {:<16} {} package(s), {} NUMA node(s), {} core(s), {} PU(s), {} PCI device(s)\n",
                        "topology", t.packages, t.numa_nodes, t.cores, t.pus, t.pci_devices)
          : fmt::format("#  {:<16} {}\n", "topology", n.topology_note);
  if (!t.io_devices.empty())
    out += fmt::format("#  {:<16} {}\n", "io devices", fmt::join(t.io_devices, ", "));
  for (const std::string& line : gpu_lines(n)) out += fmt::format("#  {:<16} {}\n", "gpus", line);
  out += fmt::format("#  {:<16} {}\n", "gpudirect", n.gpudirect);
  out += fmt::format("#  {:<16} {}\n", "verbs devices", list_or_note(n.verbs_devices, n.verbs_note));
  if (n.fabric_providers.empty()) out += fmt::format("#  {:<16} {}\n", "libfabric", n.fabric_note);
  for (const FabricProvider& f : n.fabric_providers) {
    out += fmt::format("#  {:<16} {} {}: cq data {} B, msg order {}, domains {}\n", "libfabric", f.name,
                       f.endpoint, f.cq_data_size,
                       f.msg_order.empty() ? "none" : fmt::format("{}", fmt::join(f.msg_order, "|")),
                       fmt::join(f.domains, ","));
  }
  std::vector<std::string> libraries;
  for (const auto& [name, version] : n.libraries) libraries.push_back(name + " " + version);
  out += fmt::format("#  {:<16} {}\n", "libraries", fmt::join(libraries, ", "));
  std::vector<std::string> tags;
  for (const auto& [key, value] : p.tags) tags.push_back(key + "=" + value);
  out +=
      fmt::format("#  {:<16} {}\n", "tags", tags.empty() ? "none" : fmt::format("{}", fmt::join(tags, ", ")));
  return out;
}

std::string info_block(const Platform& p, const Params& params, const ResolvedPreset* preset) {
  std::vector<std::string> hosts;
  for (const RankPlatform& r : p.ranks) {
    if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  }
  std::string out = fmt::format("# epsuite {} (git {})\n", kSuiteVersion, kGitSha);
  out += fmt::format("#  {:<16} {} on {} host(s): {}\n", "ranks", p.ranks.size(), hosts.size(),
                     fmt::join(hosts, ", "));
  out += fmt::format("#  {:<16} {}\n", "mpi", p.libraries.at("mpi"));
  out += fmt::format("#  {:<16} MPI_THREAD_MULTIPLE\n", "thread level");
  out += fmt::format("#  {:<16} {}, {}, CUDA {}, HIP {}\n", "build", kBuildType, kCompiler,
                     kWithCuda ? "on" : "off", kWithHip ? "on" : "off");
  out += fmt::format("#  {:<16} {}\n", "provider", p.provider);
  if (p.fabric) out += fmt::format("#  {:<16} {}\n", "fabric", fabric::describe_preflight(*p.fabric));
  out += node_block(p);
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    out += fmt::format("#  {:<16} host {}, device {}, nic {}\n", fmt::format("rank {}", r), p.ranks[r].host,
                       p.ranks[r].device, p.ranks[r].nic);
  }
  out += fmt::format("#  {:<16} {}\n", "fingerprint", platform_fingerprint(p));
  out += "#\n" + params.header_block();
  if (preset) out += preset_header_block(*preset);
  return out;
}

Json info_json(const Platform& p, const Params& params, const ResolvedPreset* preset) {
  Json out{{"suite_version", kSuiteVersion},
           {"git_sha", kGitSha},
           {"build",
            {{"build_type", kBuildType}, {"compiler", kCompiler}, {"cuda", kWithCuda}, {"hip", kWithHip}}},
           {"ranks", p.ranks.size()},
           {"mpi_thread_level", "MPI_THREAD_MULTIPLE"},
           {"platform", platform_to_json(p)},
           {"config", params.to_json()},
           {"preset", preset ? preset_to_json(*preset) : Json(nullptr)}};
  return out;
}

// Rank 0 writes; the status is shared so that every rank exits alike.
Status emit(const Platform& p, const Params& params, const ResolvedPreset* preset) {
  if (!mpi::is_root()) return Status();
  const std::string& json_path = params.string("json");
  if (json_path == "-") {
    fmt::print("{}\n", info_json(p, params, preset).dump(1));
    return Status();
  }
  fmt::print("{}", info_block(p, params, preset));
  std::fflush(stdout);
  if (json_path.empty()) return Status();
  return write_json_file_atomic(json_path, info_json(p, params, preset));
}

}  // namespace

namespace {

std::vector<ParamSpec> info_param_specs() {
  std::vector<ParamSpec> specs = {param_spec("timeout"),        param_spec("json"),
                                  param_spec("fabric"),         param_spec("iface"),
                                  param_spec("allow-fallback"), param_spec("require-fabric")};
  for (ParamSpec& s : preset_param_specs()) specs.push_back(std::move(s));
  return specs;
}

}  // namespace

InfoCommand::InfoCommand() : params_(std::make_unique<Params>(info_param_specs())) {}

void InfoCommand::bind(CLI::App& app) {
  params_->bind(app);
  add_tag_option(app, tags_);
  app.footer(
      "Without --preset (flag or EPSUITE_PRESET) no preset is resolved. With it, the preset's shapes are "
      "shown for this rank count; a rank count the preset cannot use exits 2 with the reason.");
}

int InfoCommand::run() {
  CommandStart start = start_command(*params_, tags_);
  Status status = start.status;
  const double timeout = start.timeout_seconds;
  int code = mpi::agree_exit_code(status, Deadline(timeout));
  if (code != 0) return mpi::finalize(code, Deadline(timeout));

  Result<Platform> platform = discover_platform(Deadline(timeout));
  if (!platform.ok()) mpi::fatal(platform.status());
  platform->tags = start.tags;
  fabric::FabricSelection selection;
  selection.fabric = params_->string("fabric");
  selection.iface = params_->string("iface");
  selection.allow_fallback = params_->enabled("allow-fallback");
  selection.require_fabric = params_->string("require-fabric");
  const Status preflight = record_fabric_preflight(selection, timeout, *platform);
  code = mpi::agree_exit_code(preflight, Deadline(timeout));
  if (code != 0) return mpi::finalize(code, Deadline(timeout));
  Result<mpi::NodeLayout> nodes = mpi::node_layout(MPI_COMM_WORLD, Deadline(timeout));
  if (!nodes.ok()) mpi::fatal(nodes.status());
  std::optional<ResolvedPreset> preset;
  Status preset_status;
  if (params_->source("preset") != ParamSource::kDefault) {
    Result<ResolvedPreset> resolved = resolve_preset_flags(*params_, *nodes);
    if (resolved.ok()) {
      preset = std::move(resolved).value();
    } else {
      preset_status = resolved.status();
    }
  }
  code = mpi::agree_exit_code(preset_status, Deadline(timeout));
  if (code != 0) return mpi::finalize(code, Deadline(timeout));
  const Status emitted = emit(*platform, *params_, preset ? &*preset : nullptr);
  code = mpi::agree_exit_code(emitted, Deadline(timeout));
  return mpi::finalize(code, Deadline(timeout));
}

}  // namespace eps
