#include "impls/fabric/verbs/verbs_check.hpp"

#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace eps::fabric::verbs {

int verbs_errno(int rc, int saved_errno) { return rc > 0 ? rc : saved_errno; }

Status verbs_error(const char* call, int error_number, const char* file, int line) {
  std::string_view path(file);
  const std::size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  const std::string reason = error_number == 0
                                 ? std::string("no errno reported")
                                 : fmt::format("{} (errno {})", std::strerror(error_number), error_number);
  return Status(StatusCode::kEnvironment, fmt::format("{} failed at {}:{}: {}", call, path, line, reason));
}

}  // namespace eps::fabric::verbs
