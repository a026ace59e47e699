// cudakit declares the three libcrypto functions it calls (crypto_declarations.hpp) so
// that it builds without OpenSSL's headers; where they are installed, this file (compiled
// only, never run) checks that each declared type is exactly OpenSSL's.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <type_traits>

#include "libraries/crypto_declarations.hpp"

namespace crypto = cudakit::detail::crypto;

// OpenSSL's opaque types stand where cudakit's do: the pointers are passed through.
using OpensslQuickMac = unsigned char* (*)(crypto::OpensslLibraryContext*, const char*, const char*, const char*,
                                           const crypto::OpensslParameter*, const void*, std::size_t,
                                           const unsigned char*, std::size_t, unsigned char*, std::size_t,
                                           std::size_t*);
static_assert(std::is_same_v<crypto::EvpQuickMac, OpensslQuickMac>);
static_assert(std::is_invocable_r_v<unsigned char*, decltype(&EVP_Q_mac), OSSL_LIB_CTX*, const char*, const char*,
                                    const char*, const OSSL_PARAM*, const void*, std::size_t, const unsigned char*,
                                    std::size_t, unsigned char*, std::size_t, std::size_t*>);
static_assert(std::is_same_v<decltype(&EVP_Q_mac),
                             unsigned char* (*)(OSSL_LIB_CTX*, const char*, const char*, const char*, const OSSL_PARAM*,
                                                const void*, std::size_t, const unsigned char*, std::size_t,
                                                unsigned char*, std::size_t, std::size_t*)>,
              "EVP_Q_mac's parameters, in order, are those crypto::EvpQuickMac names");
static_assert(std::is_same_v<crypto::RandomBytes, decltype(&RAND_bytes)>);
static_assert(std::is_same_v<crypto::ConstantTimeCompare, decltype(&CRYPTO_memcmp)>);

int main() { return 0; }
