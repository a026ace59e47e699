// Fuzz body: IPC descriptors as another process sends them (src/memory/ipc_descriptor.cpp).
// A refusal is IpcError (malformed); a descriptor that parses states a size exactly when
// its kind has one, never shares more than its allocation, keeps its payload within its
// capacity with every byte past the payload's length zero, and encodes back to the
// same bytes.
#pragma once

#include <algorithm>
#include <span>
#include <string>

#include "cudakit/ipc_descriptor.hpp"
#include "fuzz_check.hpp"

namespace cudakit::fuzz {

inline void ipc_descriptor_one_input(std::span<const std::byte> bytes) {
  IpcDescriptor d;
  try {
    d = parse_ipc_descriptor(bytes);
  } catch (const IpcError& e) {
    fuzz_check(e.reason() == IpcFailure::malformed, std::string("a refusal that is not 'malformed': ") + e.what());
    return;
  }
  fuzz_check(bytes.size() == IpcDescriptor::encoded_bytes, "a descriptor of " + std::to_string(bytes.size()) + " bytes");
  fuzz_check(d.payload_bytes <= IpcDescriptor::payload_capacity, "a payload of " + std::to_string(d.payload_bytes));
  if (d.states_size())
    fuzz_check(d.bytes > 0 && d.bytes <= d.allocation_bytes && d.allocation_bytes <= (std::uint64_t(1) << 48),
               "sizes " + std::to_string(d.bytes) + " of " + std::to_string(d.allocation_bytes));
  else
    fuzz_check(d.bytes == 0 && d.allocation_bytes == 0, "a size on a kind without one");
  const auto again = encode_ipc_descriptor(d);
  fuzz_check(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()), "a descriptor that does not round-trip");
}

}  // namespace cudakit::fuzz
