// The rendezvous's crypto primitives (src/libraries/crypto.hpp), from OpenSSL's libcrypto
// opened at run time: HMAC-SHA-256 against RFC 4231's published vectors, fresh random
// bytes, the constant-time comparison, and the error when libcrypto is missing (run in a
// process of its own by ctest, tests/CMakeLists.txt, since a failed load is remembered).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "cudakit/nccl_error.hpp"
#include "libraries/crypto.hpp"

namespace cudakit {
namespace {

namespace crypto = detail::crypto;

std::span<const unsigned char> bytes_of(std::string_view s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

std::string hex(const crypto::Tag& tag) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char b : tag) s += {digits[b >> 4], digits[b & 15]};
  return s;
}

constexpr const char* missing_library = "/nonexistent/libcrypto.so.3";

bool library_made_missing() {
  const char* v = std::getenv("CUDAKIT_LIBCRYPTO");
  return v != nullptr && std::string_view(v) == missing_library;
}

TEST(Crypto, HmacSha256MatchesRfc4231) {
  if (library_made_missing()) GTEST_SKIP() << "libcrypto is made missing in this process";
  // Test case 2: a short key, and an empty key's known tag over the empty message.
  EXPECT_EQ(hex(crypto::hmac_sha256(bytes_of("Jefe"), bytes_of("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(crypto::hmac_sha256({}, {})), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  // Test case 6: a key longer than the block size.
  const std::string long_key(131, '\xaa');
  EXPECT_EQ(hex(crypto::hmac_sha256(bytes_of(long_key), bytes_of("Test Using Larger Than Block-Size Key - Hash Key First"))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Crypto, RandomBytesAreFreshAndTheComparisonSeesEveryByte) {
  if (library_made_missing()) GTEST_SKIP() << "libcrypto is made missing in this process";
  crypto::Tag a{}, b{};
  crypto::random_bytes(a);
  crypto::random_bytes(b);
  EXPECT_NE(a, b);
  EXPECT_NE(a, crypto::Tag{});
  EXPECT_TRUE(crypto::equal_in_constant_time(a, a));
  for (std::size_t i : {std::size_t{0}, std::size_t{17}, a.size() - 1}) {
    crypto::Tag c = a;
    c[i] ^= 1;
    EXPECT_FALSE(crypto::equal_in_constant_time(a, c)) << i;
  }
  EXPECT_NE(crypto::library_path().find("libcrypto"), std::string::npos) << crypto::library_path();
}

TEST(CryptoLoader, AMissingLibraryNamesEveryFileTried) {
  if (!library_made_missing()) GTEST_SKIP() << "runs with CUDAKIT_LIBCRYPTO=" << missing_library << " (ctest does)";
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is remembered, and said again
    try {
      crypto::random_bytes(std::span<unsigned char>());
      ADD_FAILURE() << "libcrypto loaded";
    } catch (const nccl::BootstrapError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("OpenSSL's libcrypto is not available, and the TCP rendezvous authenticates its ranks with "
                       "it: no libcrypto.so.3 could be opened (the path came from CUDAKIT_LIBCRYPTO); tried:\n  "
                       "/nonexistent/libcrypto.so.3: "),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("Install OpenSSL 3 (apt-get install libssl3)"), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace cudakit
