// Provider selection for the libfabric fabric (docs/fabrics.md 6.1): which libfabric provider a variant
// names, the fi_getinfo hints that express the Fabric contract (fabric.hpp), and what the chosen fi_info
// promises.
//
// Variants: "shm" -> provider "shm"; "tcp" -> "tcp;ofi_rxm" bound to one network interface (docs/fabrics.md
// 6.4: --iface or FI_TCP_IFACE, loopback only when every rank is on one node; the endpoint address must be
// that interface's); "efa" -> "efa"; "verbs" -> "verbs;ofi_rxm".
//
// Hints (make_hints): FI_EP_RDM; caps FI_RMA | FI_WRITE | FI_REMOTE_WRITE (+ FI_MSG when the provider
// needs posted receives for remote CQ data); modes the fabric can honour: FI_CONTEXT, FI_CONTEXT2 (every
// operation gets its own context slot) and FI_RX_CQ_DATA (it keeps receives posted); mr_mode FI_MR_LOCAL
// | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT (all handled, FI_MR_RAW is not);
// FI_THREAD_DOMAIN (a Fabric is used by one thread at a time); optionally tx/rx msg_order FI_ORDER_WAW
// (+ FI_ORDER_RMA_WAW) and tx op_flags FI_DELIVERY_COMPLETE.
//
// select_provider tries, in order, {ordered, delivery-complete} then {delivery-complete}, each first with
// FI_ATOMIC in caps and then without (a provider without remote atomics still serves puts; its fabric then
// refuses atomics saying so), and takes the first fi_info. Ordering comes before atomics: the signal
// strategies rely on it. Delivery-complete is required, not merely preferred: a put's local completion must
// mean its bytes are placed at the target (fabric.hpp kLocal; sender-barrier, docs/fabrics.md 6.2 relies on
// it), and a provider that only offers transmit-complete would weaken that silently, so it is refused with a
// kEnvironment error that says so. So are cq_data_size < 4 (immediates are 32 bits, docs/fabrics.md 6.1) and
// mr_key_size > 8. A missing provider is kEnvironment "libfabric:efa: provider efa not available here
// (fi_getinfo: No data available)".
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "impls/fabric/libfabric/fi_api.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric::ofi {

struct ProviderSpec {
  std::string variant;           // "tcp"
  std::string prov_name;         // "tcp;ofi_rxm"
  std::string node;              // fi_getinfo node with FI_SOURCE (the interface's address), empty for none
  bool binds_interface = false;  // tcp: `node` is the IPv4 address of the chosen interface
  bool hmem = false;             // ask for caps FI_HMEM and mr_mode FI_MR_HMEM (device memory, hmem.hpp)
};

// The registered variants, in registration order.
const std::vector<std::string>& libfabric_variants();
// kInvalidArgument "libfabric variant: must be one of shm, tcp, efa, verbs, got 'x'".
Result<ProviderSpec> provider_spec(std::string_view variant);

// fi_freeinfo through fi_api(): an fi_info exists only where libfabric was loaded to make it.
struct InfoDeleter {
  void operator()(fi_info* info) const;
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

struct HintOptions {
  bool ordered = true;            // ask for FI_ORDER_WAW (+ FI_ORDER_RMA_WAW) on tx and rx
  bool delivery_complete = true;  // ask for tx op_flags FI_DELIVERY_COMPLETE
  bool msg = false;               // add FI_MSG | FI_RECV (posted receives for FI_RX_CQ_DATA)
  bool atomic = false;            // add FI_ATOMIC (remote atomic adds, fabric.hpp try_atomic_add)
};

// nullptr only when fi_allocinfo runs out of memory.
InfoPtr make_hints(const FiApi& fi, const ProviderSpec& spec, const HintOptions& options);

// The write-after-write ordering bits the fabric relies on for `ordered`.
std::uint64_t waw_order_bits();
// True when tx and rx msg_order both carry waw_order_bits() for messages up to max_put_bytes.
bool waw_ordered(const fi_info& info, std::size_t max_put_bytes);

struct SelectedProvider {
  InfoPtr info;          // the first fi_info of the successful query
  bool asked_ordered;    // the query asked for WAW ordering (the provider enables it only when asked)
  bool atomics = false;  // the query asked for FI_ATOMIC and got it
  // Without atomics: the provider would offer FI_ATOMIC if the fabric gave up write-after-write ordering.
  bool atomics_only_unordered = false;
};

// Runs the fi_getinfo queries described above (fi_getinfo is not collective). Loads libfabric first:
// kEnvironment "libfabric:shm: libfabric.so.1 cannot be loaded: <dlerror>" where it cannot.
Result<SelectedProvider> select_provider(const ProviderSpec& spec);

// Why a provider's remote atomics, although offered, must not be used in libfabric `version` (FI_VERSION);
// empty when nothing is known against them. The shm provider up to libfabric 1.17 corrupts the operands of
// delivery-complete atomics when many are in flight (the target's inject-buffer pool is taken without a
// check; conformance ConcurrentAddsSumExactly found sums off by garbage, and a crash when they were
// throttled). Later versions are used as they are, and the conformance suite checks them.
std::string broken_atomics(std::uint32_t version, std::string_view provider);

// The IPv4 address of network interface `iface` ("lo" -> "127.0.0.1"); kInvalidArgument naming --iface and
// the interfaces that exist when it has none.
Result<std::string> interface_ipv4(const std::string& iface);
// Whether an FI_SOCKADDR_IN endpoint address is `ipv4` (dotted).
bool address_is(const void* addr, std::size_t addrlen, std::uint32_t addr_format, const std::string& ipv4);

// "libfabric 1.17 provider shm 117.0 (fabric shm, domain shm, ordered WAW, delivery-complete,
// mr_mode 0x0, cq_data 8 B, max_msg 16777215 B, tx 1024)".
std::string describe_provider(const FiApi& fi, const fi_info& info, bool ordered, std::size_t max_put_bytes);

}  // namespace eps::fabric::ofi
