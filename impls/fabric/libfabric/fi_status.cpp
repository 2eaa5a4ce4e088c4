#include "impls/fabric/libfabric/fi_status.hpp"

#include <rdma/fi_errno.h>

#include <string_view>

namespace eps::fabric::ofi {

Status fi_status(std::int64_t rc, const char* call, const char* file, int line) {
  if (rc >= 0) return Status();
  // The file's directories add nothing to the message; keep its last component.
  std::string_view path(file);
  const std::size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  return Status(StatusCode::kEnvironment, fmt::format("{} failed at {}:{}: {} ({})", call, path, line,
                                                      fi_strerror(static_cast<int>(-rc)), rc));
}

}  // namespace eps::fabric::ofi
