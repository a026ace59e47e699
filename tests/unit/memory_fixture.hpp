// The fixture of the memory unit tests: the fake driver, plus helpers for host data and
// a check that cudakit never handed pageable memory to an asynchronous copy.
#pragma once

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "cudakit/copy.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/host_registration.hpp"
#include "cudakit/memory_pool.hpp"
#include "cudakit/peer_access.hpp"
#include "cudakit/pinned_buffer.hpp"
#include "memory/staging.hpp"
#include "fake_fixture.hpp"

namespace cudakit::testing {

class MemoryTest : public FakeDriverTest {
 protected:
  Device dev(int ordinal = 0) { return Device::get(ordinal); }

  void TearDown() override {
    EXPECT_TRUE(fake().pageable_async_copies.empty())
        << "cudakit gave pageable memory to an asynchronous copy:\n" << join_lines(fake().pageable_async_copies);
    FakeDriverTest::TearDown();
  }

  /// Small staging buffers, so that small copies take several of them.
  void small_staging(std::size_t chunk_bytes = 64, int max_chunks = 3) {
    detail::set_staging_limits_for_testing(chunk_bytes, max_chunks);
  }

  /// n values that are neither zero nor the fake's poison, distinct per `seed`.
  template <class T = float>
  static std::vector<T> values(std::size_t n, int seed = 1) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>((i * 7 + static_cast<std::size_t>(seed) * 13) % 101 + 1);
    return v;
  }

  int calls(driver::EntryId id) { return fake().calls(id); }
};

}  // namespace cudakit::testing
