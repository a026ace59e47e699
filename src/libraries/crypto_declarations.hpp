// Internal: the three libcrypto functions cudakit calls, declared here as OpenSSL 3
// declares them (openssl/evp.h, openssl/rand.h, openssl/crypto.h), so that building
// cudakit needs no OpenSSL headers: libcrypto is opened at run time (docs/design.md,
// decision 22). Where OpenSSL's headers are installed, the build check
// BuildCheck.CryptoDeclarationsMatchTheRealHeaders compares these types with theirs.
#pragma once

#include <cstddef>

namespace cudakit::detail::crypto {

/// OpenSSL's library context and parameter list: opaque; cudakit passes null for both.
struct OpensslLibraryContext;
struct OpensslParameter;

/// EVP_Q_mac: a one-shot MAC (cudakit asks for HMAC over SHA-256).
using EvpQuickMac = unsigned char* (*)(OpensslLibraryContext* libctx, const char* name, const char* propq,
                                       const char* subalg, const OpensslParameter* params, const void* key,
                                       std::size_t keylen, const unsigned char* data, std::size_t datalen,
                                       unsigned char* out, std::size_t outsize, std::size_t* outlen);
/// RAND_bytes: cryptographically strong random bytes; 1 on success.
using RandomBytes = int (*)(unsigned char* buf, int num);
/// CRYPTO_memcmp: a comparison whose time does not depend on the bytes; 0 when equal.
using ConstantTimeCompare = int (*)(const void* in_a, const void* in_b, std::size_t len);

}  // namespace cudakit::detail::crypto
