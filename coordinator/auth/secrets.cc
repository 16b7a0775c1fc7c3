#include "coordinator/auth/secrets.h"

#include <openssl/rand.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"

namespace deepnet::coordinator {

absl::StatusOr<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (bytes > 0 && RAND_bytes(buffer.data(), static_cast<int>(buffer.size())) != 1) {
    return absl::InternalError("the cryptographic random source (OpenSSL RAND_bytes) failed");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(buffer.data()), buffer.size()));
}

bool ConstantTimeEquals(absl::string_view known, absl::string_view presented) {
  unsigned char diff = known.size() == presented.size() ? 0 : 1;
  for (size_t i = 0; i < known.size(); ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= static_cast<unsigned char>(known[i]) ^ p;
  }
  return diff == 0;
}

}  // namespace deepnet::coordinator
