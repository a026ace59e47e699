// The libcrypto loader and the primitives of crypto.hpp.
#include "libraries/crypto.hpp"

#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "cudakit/nccl_error.hpp"
#include "driver/loaded_library.hpp"
#include "libraries/crypto_declarations.hpp"

namespace cudakit::detail::crypto {

namespace {

// The entries used, typed as OpenSSL declares them (crypto_declarations.hpp).
struct Api {
  std::string path;
  EvpQuickMac q_mac = nullptr;
  RandomBytes rand_bytes = nullptr;
  ConstantTimeCompare memcmp = nullptr;
};

std::unique_ptr<Api> load() {
  const char* override_path = std::getenv("CUDAKIT_LIBCRYPTO");
  const bool overridden = override_path != nullptr && override_path[0] != '\0';
  std::vector<std::string> candidates =
      overridden ? std::vector<std::string>{override_path} : std::vector<std::string>{"libcrypto.so.3"};
  std::string tried;
  const OpenedLibrary opened = open_first(candidates, tried);
  if (opened.library == nullptr)
    throw nccl::BootstrapError("OpenSSL's libcrypto is not available, and the TCP rendezvous authenticates its ranks "
                               "with it: no libcrypto.so.3 could be opened" +
                               std::string(overridden ? " (the path came from CUDAKIT_LIBCRYPTO)" : "") +
                               "; tried:" + tried + "\nInstall OpenSSL 3 (apt-get install libssl3)");
  auto api = std::make_unique<Api>();
  api->path = loaded_path(opened.library, opened.file);
  std::string missing;
  resolve_symbol(opened.library, "EVP_Q_mac", api->q_mac, &missing);
  resolve_symbol(opened.library, "RAND_bytes", api->rand_bytes, &missing);
  resolve_symbol(opened.library, "CRYPTO_memcmp", api->memcmp, &missing);
  if (!missing.empty())
    throw nccl::BootstrapError("libcrypto in " + api->path + " lacks " + missing +
                               "; the TCP rendezvous needs OpenSSL 3.0 or newer");
  return api;
}

const Api& api() {
  // Never destroyed: a rendezvous may run during static destruction.
  static auto* state = new LoadedOnce<Api, nccl::BootstrapError>;
  return state->get(load);
}

}  // namespace

Tag hmac_sha256(std::span<const unsigned char> key, std::span<const unsigned char> message) {
  // EVP_Q_mac reads the key through a non-null pointer even when it is empty.
  static const unsigned char no_key = 0;
  Tag tag{};
  std::size_t written = 0;
  const unsigned char* made =
      api().q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.empty() ? &no_key : key.data(), key.size(),
                  message.data(), message.size(), tag.data(), tag.size(), &written);
  if (made == nullptr || written != tag.size())
    throw nccl::BootstrapError("libcrypto in " + api().path + " could not compute an HMAC-SHA-256");
  return tag;
}

void random_bytes(std::span<unsigned char> out) {
  if (api().rand_bytes(out.data(), static_cast<int>(out.size())) != 1)
    throw nccl::BootstrapError("libcrypto in " + api().path + " could not make random bytes (RAND_bytes failed)");
}

bool equal_in_constant_time(const Tag& a, const Tag& b) { return api().memcmp(a.data(), b.data(), a.size()) == 0; }

std::string library_path() { return api().path; }

}  // namespace cudakit::detail::crypto
