// The planner's shared key (planner.hpp): parsed from EPSUITE_EPLB_KEY without ever echoing its value.
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "impls/layer/planner/planner.hpp"

namespace eps::planner {
namespace {

// Every key error names the variable, never its value (docs/eplb.md 8.7).
template <typename... Args>
Status key_error(fmt::format_string<Args...> format, Args&&... args) {
  return invalid_argument(kKeyVariable, format, std::forward<Args>(args)...);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void strip_trailing_whitespace(std::string& text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
}

// The hex digits of `text` as bytes. Reports positions and lengths only: a digit of the key must not leak
// into a message.
Result<std::vector<unsigned char>> hex_bytes(std::string_view text) {
  if (text.size() % 2 != 0) return key_error("has an odd number ({}) of hex digits", text.size());
  if (text.size() < 2 * kMinKeyBytes) {
    return key_error("must hold at least {} bytes ({} hex digits), got {} hex digits", kMinKeyBytes,
                     2 * kMinKeyBytes, text.size());
  }
  std::vector<unsigned char> bytes(text.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int high = hex_value(text[2 * i]);
    const int low = hex_value(text[2 * i + 1]);
    if (high < 0 || low < 0) {
      OPENSSL_cleanse(bytes.data(), bytes.size());
      return key_error("character {} is not a hex digit (expected hex, or @FILE)",
                       2 * i + (high < 0 ? 1 : 2));
    }
    bytes[i] = static_cast<unsigned char>(high * 16 + low);
  }
  return bytes;
}

Result<std::string> read_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return key_error("cannot read the key file '{}': {}", path, std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return key_error("reading the key file '{}' failed", path);
  strip_trailing_whitespace(text);
  return text;
}

}  // namespace

PlannerKey::~PlannerKey() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

Result<PlannerKey> PlannerKey::from_text(std::string_view text) {
  PlannerKey key;
  if (!text.empty() && text.front() == '@') {
    EPS_ASSIGN_OR_RETURN(std::string contents, read_key_file(std::string(text.substr(1))));
    auto bytes = hex_bytes(contents);
    OPENSSL_cleanse(contents.data(), contents.size());
    if (!bytes.ok()) return bytes.status();
    key.bytes_ = std::move(bytes).value();
    return key;
  }
  EPS_ASSIGN_OR_RETURN(key.bytes_, hex_bytes(text));
  return key;
}

Result<PlannerKey> PlannerKey::from_environment() {
  const char* text = std::getenv(std::string(kKeyVariable).c_str());
  if (text == nullptr || *text == '\0') {
    return key_error(
        "is not set; the planner needs a shared key of at least {} bytes ({} hex digits, or @FILE)",
        kMinKeyBytes, 2 * kMinKeyBytes);
  }
  return from_text(text);
}

Result<PlannerKey> PlannerKey::random() {
  PlannerKey key;
  key.bytes_.resize(kMinKeyBytes);
  if (RAND_bytes(key.bytes_.data(), static_cast<int>(key.bytes_.size())) != 1) {
    return Status(StatusCode::kEnvironment, "planner: OpenSSL RAND_bytes could not make a key");
  }
  return key;
}

}  // namespace eps::planner
