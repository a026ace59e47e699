// Internal: the few primitives the authenticated TCP rendezvous needs, from OpenSSL's
// libcrypto, opened at run time like every library cudakit uses (DESIGN 8.22): HMAC with
// SHA-256, random bytes from the system's generator, and a comparison whose time does not
// depend on where two byte strings differ. No hash or MAC is written here.
//
// The library is libcrypto.so.3 (OpenSSL 3: Debian 12, Ubuntu 22.04 and newer), or the
// file CUDAKIT_LIBCRYPTO names. When it cannot be opened, each function throws
// nccl::BootstrapError saying what was tried and how to install it.
//
// Thread safety: any thread; the library is opened once.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

namespace cudakit::detail::crypto {

/// An HMAC-SHA-256 tag.
using Tag = std::array<unsigned char, 32>;

/// HMAC-SHA-256 of `message` under `key` (an empty key is allowed).
Tag hmac_sha256(std::span<const unsigned char> key, std::span<const unsigned char> message);

/// Fills `out` with bytes from OpenSSL's cryptographically secure generator.
void random_bytes(std::span<unsigned char> out);

/// Whether two equally long tags are equal, in time that does not depend on their bytes.
bool equal_in_constant_time(const Tag& a, const Tag& b);

/// The file libcrypto was opened from (opens it if needed).
std::string library_path();

}  // namespace cudakit::detail::crypto
