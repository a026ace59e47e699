// How new memory starts: every allocation says it. Shared by
// DeviceBuffer and PinnedBuffer.
//
//   DeviceBuffer<float> a(stream, n, cudakit::uninitialized);
//   PinnedBuffer<float> b(n, cudakit::zeroed);
#pragma once

namespace cudakit {

/// Ask for uninitialized memory.
struct Uninitialized {};
inline constexpr Uninitialized uninitialized{};
/// Ask for zero-filled memory (device memory: a stream-ordered memset on the allocating
/// stream; host memory: filled before the constructor returns).
struct Zeroed {};
inline constexpr Zeroed zeroed{};

}  // namespace cudakit
