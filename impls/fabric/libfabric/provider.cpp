#include "impls/fabric/libfabric/provider.hpp"

#include <ifaddrs.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

namespace eps::fabric::ofi {
namespace {

constexpr std::uint64_t kModes = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
constexpr std::uint64_t kMrModes =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
constexpr std::size_t kMinCqDataBytes = 4;  // docs/fabrics.md 6.1: 32-bit immediates
constexpr std::size_t kMaxKeyBytes = sizeof(std::uint64_t);

struct Query {
  InfoPtr info;
  int rc = 0;
};

Query run_query(const FiApi& fi, const ProviderSpec& spec, const HintOptions& options) {
  InfoPtr hints = make_hints(fi, spec, options);
  if (!hints) return {nullptr, -FI_ENOMEM};
  fi_info* info = nullptr;
  const char* node = spec.node.empty() ? nullptr : spec.node.c_str();
  const int rc = fi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, nullptr,
                            node != nullptr ? FI_SOURCE : 0, hints.get(), &info);
  if (rc != 0) return {nullptr, rc};
  return {InfoPtr(info), 0};
}

// fi_getinfo return codes of queries already run in this process, by (provider, node, options): a provider's
// answer does not change, and the atomic queries would otherwise add fi_getinfo calls (tens of milliseconds
// each on socket providers) to every fabric made.
class QueryMemo {
 public:
  std::optional<int> known(const ProviderSpec& spec, const HintOptions& options) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = rcs_.find(key(spec, options));
    if (it == rcs_.end()) return std::nullopt;
    return it->second;
  }
  void remember(const ProviderSpec& spec, const HintOptions& options, int rc) {
    const std::lock_guard<std::mutex> lock(mutex_);
    rcs_[key(spec, options)] = rc;
  }

 private:
  static std::string key(const ProviderSpec& spec, const HintOptions& options) {
    return fmt::format("{}|{}|{}{}{}{}", spec.prov_name, spec.node, options.ordered,
                       options.delivery_complete, options.msg, options.atomic);
  }
  mutable std::mutex mutex_;
  std::map<std::string, int> rcs_;
};

QueryMemo& query_memo() {
  static QueryMemo memo;
  return memo;
}

// Whether the provider answers `options` at all, from the memo when it was asked before.
bool offers(const FiApi& fi, const ProviderSpec& spec, const HintOptions& options) {
  if (const std::optional<int> rc = query_memo().known(spec, options)) return *rc == 0;
  const int rc = run_query(fi, spec, options).rc;
  query_memo().remember(spec, options, rc);
  return rc == 0;
}

std::string label(const ProviderSpec& spec) { return fmt::format("libfabric:{}", spec.variant); }

Status check_info(const ProviderSpec& spec, const fi_info& info) {
  const fi_domain_attr& domain = *info.domain_attr;
  if (domain.cq_data_size < kMinCqDataBytes) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("{}: provider {} carries {} bytes of remote CQ data; 32-bit immediates need {} "
                              "(docs/fabrics.md 6.1)",
                              label(spec), spec.prov_name, domain.cq_data_size, kMinCqDataBytes));
  }
  if ((domain.mr_mode & FI_MR_RAW) != 0 || domain.mr_key_size > kMaxKeyBytes) {
    return Status(
        StatusCode::kUnavailable,
        fmt::format("{}: provider {} needs {}-byte raw memory keys; the fabric exchanges 64-bit keys",
                    label(spec), spec.prov_name, domain.mr_key_size));
  }
  if ((info.mode & ~kModes) != 0) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("{}: provider {} requires unsupported mode bits {:#x}", label(spec),
                              spec.prov_name, info.mode & ~kModes));
  }
  return Status();
}

}  // namespace

void InfoDeleter::operator()(fi_info* info) const {
  const Result<const FiApi*> fi = fi_api();
  if (fi.ok()) (*fi)->freeinfo(info);
}

const std::vector<std::string>& libfabric_variants() {
  static const std::vector<std::string> variants = {"shm", "tcp", "efa", "verbs"};
  return variants;
}

Result<ProviderSpec> provider_spec(std::string_view variant) {
  if (variant == "shm") return ProviderSpec{"shm", "shm", "", false};
  if (variant == "tcp") return ProviderSpec{"tcp", "tcp;ofi_rxm", "", true};
  if (variant == "efa") return ProviderSpec{"efa", "efa", "", false};
  if (variant == "verbs") return ProviderSpec{"verbs", "verbs;ofi_rxm", "", false};
  return invalid_argument("libfabric variant", "must be one of {}, got '{}'",
                          fmt::join(libfabric_variants(), ", "), variant);
}

InfoPtr make_hints(const FiApi& fi, const ProviderSpec& spec, const HintOptions& options) {
  InfoPtr hints(fi.allocinfo());
  if (!hints) return nullptr;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  if (options.msg) hints->caps |= FI_MSG | FI_RECV;
  if (options.atomic) hints->caps |= FI_ATOMIC;
  hints->mode = kModes;
  hints->domain_attr->mr_mode = kMrModes;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = strdup(spec.prov_name.c_str());
  if (hints->fabric_attr->prov_name == nullptr) return nullptr;
  if (options.ordered) {
    hints->tx_attr->msg_order = waw_order_bits();
    hints->rx_attr->msg_order = waw_order_bits();
  }
  if (options.delivery_complete) hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  if (spec.hmem) {
    hints->caps |= FI_HMEM;
    hints->domain_attr->mr_mode |= FI_MR_HMEM;
  }
  return hints;
}

std::uint64_t waw_order_bits() {
#ifdef FI_ORDER_RMA_WAW
  return FI_ORDER_WAW | FI_ORDER_RMA_WAW;
#else
  return FI_ORDER_WAW;
#endif
}

bool waw_ordered(const fi_info& info, std::size_t max_put_bytes) {
  const std::uint64_t bits = waw_order_bits();
  return (info.tx_attr->msg_order & bits) == bits && (info.rx_attr->msg_order & bits) == bits &&
         info.ep_attr->max_order_waw_size >= max_put_bytes;
}

Result<SelectedProvider> select_provider(const ProviderSpec& spec) {
  const Result<const FiApi*> loaded = fi_api();
  if (!loaded.ok()) {
    return Status(loaded.status().code(), fmt::format("{}: {}", label(spec), loaded.status().message()));
  }
  const FiApi& fi = **loaded;
  int first_rc = 0;
  // A provider whose atomics are known to be broken is opened without FI_ATOMIC: nothing of it changes.
  const bool want_atomics = broken_atomics(fi.version(), spec.prov_name).empty();
  for (const bool ordered : {true, false}) {
    for (const bool atomic : {true, false}) {
      if (atomic && !want_atomics) continue;
      // A combination this provider refused before is not asked again (it only costs time).
      const HintOptions first{ordered, true, false, atomic};
      if (atomic && query_memo().known(spec, first).value_or(0) != 0) continue;
      Query query = run_query(fi, spec, first);
      if (atomic) query_memo().remember(spec, first, query.rc);
      if (query.rc == 0 && (query.info->mode & FI_RX_CQ_DATA) != 0) {
        query = run_query(fi, spec, HintOptions{ordered, true, true, atomic});
      }
      if (query.rc == 0) {
        EPS_RETURN_IF_ERROR(check_info(spec, *query.info));
        const bool atomics = atomic && (query.info->caps & FI_ATOMIC) != 0;
        // Tell "no atomics at all" from "atomics only without the ordering" (tcp;ofi_rxm 1.17).
        const bool unordered_atomics =
            !atomic && ordered && want_atomics && offers(fi, spec, HintOptions{false, true, false, true});
        return SelectedProvider{std::move(query.info), ordered, atomics, unordered_atomics};
      }
      if (first_rc == 0 && !atomic) first_rc = query.rc;  // the message names the plain query's failure
    }
  }
  if (run_query(fi, spec, HintOptions{false, false, false}).rc == 0) {
    return Status(
        StatusCode::kUnavailable,
        fmt::format("{}: provider {} offers no FI_DELIVERY_COMPLETE, so a put's local completion would "
                    "not imply placement at the target (fabric.hpp kLocal); not used",
                    label(spec), spec.prov_name));
  }
  return Status(StatusCode::kUnavailable, fmt::format("{}: provider {} not available here (fi_getinfo: {})",
                                                      label(spec), spec.prov_name, fi.strerror(-first_rc)));
}

std::string broken_atomics(std::uint32_t version, std::string_view provider) {
  if (provider == "shm" && FI_VERSION_LT(version, FI_VERSION(1, 18))) {
    return fmt::format(
        "provider shm of libfabric {}.{} corrupts the operands of delivery-complete atomics with many in "
        "flight (an unchecked inject-buffer pool); not used",
        FI_MAJOR(version), FI_MINOR(version));
  }
  return "";
}

Result<std::string> interface_ipv4(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return Status(StatusCode::kEnvironment, fmt::format("getifaddrs failed: {}", std::strerror(errno)));
  }
  std::optional<std::string> found;
  std::vector<std::string> names;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    names.emplace_back(a->ifa_name);
    if (iface != a->ifa_name || found) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) found = text;
  }
  freeifaddrs(list);
  if (found) return *found;
  return invalid_argument("--iface",
                          "no IPv4 address on interface '{}' (FI_TCP_IFACE); interfaces with one: {}", iface,
                          fmt::join(names, ", "));
}

bool address_is(const void* addr, std::size_t addrlen, std::uint32_t addr_format, const std::string& ipv4) {
  if (addr_format != FI_SOCKADDR_IN || addrlen < sizeof(sockaddr_in)) return false;
  sockaddr_in in{};
  std::memcpy(&in, addr, sizeof(in));
  in_addr expected{};
  return in.sin_family == AF_INET && inet_pton(AF_INET, ipv4.c_str(), &expected) == 1 &&
         in.sin_addr.s_addr == expected.s_addr;
}

std::string describe_provider(const FiApi& fi, const fi_info& info, bool ordered, std::size_t max_put_bytes) {
  const std::uint32_t version = fi.version();
  const std::uint32_t prov_version = info.fabric_attr->prov_version;
  const bool dc = (info.tx_attr->op_flags & FI_DELIVERY_COMPLETE) != 0;
  return fmt::format(
      "libfabric {}.{} provider {} {}.{} (fabric {}, domain {}, {}, {}, mr_mode {:#x}, cq_data {} B, max put "
      "{} B, "
      "tx {})",
      FI_MAJOR(version), FI_MINOR(version), info.fabric_attr->prov_name, FI_MAJOR(prov_version),
      FI_MINOR(prov_version), info.fabric_attr->name, info.domain_attr->name,
      ordered ? "ordered WAW" : "unordered", dc ? "delivery-complete" : "transmit-complete",
      static_cast<std::uint64_t>(info.domain_attr->mr_mode), info.domain_attr->cq_data_size, max_put_bytes,
      info.tx_attr->size);
}

}  // namespace eps::fabric::ofi
