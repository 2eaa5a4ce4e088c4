// Frames of the planner protocol (planner.hpp): u32 length, u64 counter, HMAC-SHA256, body.
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <array>
#include <cstring>
#include <memory>

#include "impls/layer/planner/planner.hpp"

namespace eps::planner {
namespace {

using Mac = std::array<unsigned char, kMacBytes>;

void put_le(std::vector<unsigned char>& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<unsigned char>(value >> (8 * i)));
}

std::uint64_t get_le(const unsigned char* data, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | data[i];
  return value;
}

struct MacContextDeleter {
  void operator()(EVP_MAC_CTX* context) const { EVP_MAC_CTX_free(context); }
};

// The HMAC implementation, fetched once: fetching looks the algorithm up in OpenSSL's provider tables.
EVP_MAC* hmac_algorithm() {
  static EVP_MAC* const algorithm = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return algorithm;
}

Status openssl_failure(std::string_view call) {
  return Status(StatusCode::kEnvironment,
                fmt::format("planner: OpenSSL {} failed computing a frame MAC", call));
}

// HMAC-SHA256 over (direction, counter, body): the direction is bound into the MAC so that a frame cannot
// be played back to the peer that sent it.
Result<Mac> frame_mac(const PlannerKey& key, Direction direction, std::uint64_t counter,
                      const unsigned char* body, std::size_t body_size) {
  EVP_MAC* algorithm = hmac_algorithm();
  if (algorithm == nullptr) return openssl_failure("EVP_MAC_fetch(HMAC)");
  std::unique_ptr<EVP_MAC_CTX, MacContextDeleter> context(EVP_MAC_CTX_new(algorithm));
  if (!context) return openssl_failure("EVP_MAC_CTX_new");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  const std::vector<unsigned char>& secret = key.bytes();
  if (EVP_MAC_init(context.get(), secret.data(), secret.size(), params) != 1)
    return openssl_failure("EVP_MAC_init");
  std::vector<unsigned char> prefix;
  prefix.push_back(static_cast<unsigned char>(direction));
  put_le(prefix, counter, 8);
  if (EVP_MAC_update(context.get(), prefix.data(), prefix.size()) != 1 ||
      EVP_MAC_update(context.get(), body, body_size) != 1) {
    return openssl_failure("EVP_MAC_update");
  }
  Mac mac{};
  std::size_t written = 0;
  if (EVP_MAC_final(context.get(), mac.data(), &written, mac.size()) != 1 || written != mac.size()) {
    return openssl_failure("EVP_MAC_final");
  }
  return mac;
}

}  // namespace

Result<std::vector<unsigned char>> encode_frame(const PlannerKey& key, Direction direction,
                                                std::uint64_t counter, std::string_view body) {
  if (body.size() > kMaxFrameBytes - kMinFrameLength) {
    return invalid_argument("frame", "a body of {} bytes exceeds the 16 MiB cap", body.size());
  }
  const auto* body_bytes = reinterpret_cast<const unsigned char*>(body.data());
  EPS_ASSIGN_OR_RETURN(const Mac mac, frame_mac(key, direction, counter, body_bytes, body.size()));
  std::vector<unsigned char> frame;
  frame.reserve(kFrameHeaderBytes + kMinFrameLength + body.size());
  put_le(frame, kMinFrameLength + body.size(), 4);
  put_le(frame, counter, 8);
  frame.insert(frame.end(), mac.begin(), mac.end());
  frame.insert(frame.end(), body_bytes, body_bytes + body.size());
  return frame;
}

void FrameReader::append(const unsigned char* data, std::size_t size) {
  if (!failure_.ok()) return;  // a failed reader keeps nothing more
  buffer_.insert(buffer_.end(), data, data + size);
}

Result<std::optional<std::string>> FrameReader::fail(Status status) {
  failure_ = std::move(status);
  buffer_.clear();
  return failure_;
}

Result<std::optional<std::string>> FrameReader::next() {
  if (!failure_.ok()) return failure_;
  if (buffer_.size() < kFrameHeaderBytes) return std::optional<std::string>();
  // The length is judged as soon as it is known, so an oversize frame is refused before its body is read.
  const std::uint64_t length = get_le(buffer_.data(), 4);
  if (length > kMaxFrameBytes) {
    return fail(invalid_argument("frame", "frame length {} exceeds the 16 MiB cap", length));
  }
  if (length < kMinFrameLength) {
    return fail(
        invalid_argument("frame", "frame length {} is below the {}-byte minimum", length, kMinFrameLength));
  }
  if (buffer_.size() < kFrameHeaderBytes + length) return std::optional<std::string>();
  const unsigned char* counter_bytes = buffer_.data() + kFrameHeaderBytes;
  const unsigned char* received_mac = counter_bytes + 8;
  const unsigned char* body = received_mac + kMacBytes;
  const std::size_t body_size = length - kMinFrameLength;
  const std::uint64_t counter = get_le(counter_bytes, 8);
  // The MAC first: nothing in an unauthenticated frame, the counter included, is believed or reported.
  const Result<Mac> expected = frame_mac(key_, direction_, counter, body, body_size);
  if (!expected.ok()) return fail(expected.status());
  if (CRYPTO_memcmp(expected->data(), received_mac, kMacBytes) != 0) {
    return fail(invalid_argument("frame", "bad MAC"));
  }
  if (counter <= last_counter_) {
    return fail(invalid_argument("frame", "counter {} does not increase past {}", counter, last_counter_));
  }
  last_counter_ = counter;
  std::string message(reinterpret_cast<const char*>(body), body_size);
  buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(kFrameHeaderBytes + length));
  return std::optional<std::string>(std::move(message));
}

}  // namespace eps::planner
