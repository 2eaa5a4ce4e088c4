#include "impls/fabric/libfabric/fi_status.hpp"

#include <string>
#include <string_view>

#include "impls/fabric/libfabric/fi_api.hpp"

namespace eps::fabric::ofi {
namespace {

// fi_strerror's text; a failed libfabric call implies libfabric is loaded, the number says enough otherwise.
std::string error_text(int error) {
  const Result<const FiApi*> fi = fi_api();
  return fi.ok() ? (*fi)->strerror(error) : fmt::format("libfabric error {}", error);
}

}  // namespace

Status fi_status(std::int64_t rc, const char* call, const char* file, int line) {
  if (rc >= 0) return Status();
  // The file's directories add nothing to the message; keep its last component.
  std::string_view path(file);
  const std::size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  return Status(StatusCode::kEnvironment, fmt::format("{} failed at {}:{}: {} ({})", call, path, line,
                                                      error_text(static_cast<int>(-rc)), rc));
}

}  // namespace eps::fabric::ofi
