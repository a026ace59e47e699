// Fuzz body: the file rendezvous's id file (src/libraries/rendezvous_wire.cpp), as each
// rank reads it. A file that decodes names a positive job size, and the file rank 0 would
// write for that job and id decodes to the same.
#pragma once

#include <span>
#include <string_view>

#include "fuzz_check.hpp"
#include "libraries/rendezvous_wire.hpp"

namespace cudakit::fuzz {

inline void rendezvous_file_one_input(std::span<const unsigned char> bytes) {
  namespace wire = nccl::wire;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto f = wire::decode_file(text);
  if (!f.value) {
    fuzz_check(!f.problem.empty(), "a refused file without a reason");
    return;
  }
  fuzz_check(f.value->ranks >= 1, "a job of " + std::to_string(f.value->ranks) + " ranks");
  auto again = wire::decode_file(wire::encode_file(f.value->ranks, f.value->id));
  fuzz_check(again.value && again.value->ranks == f.value->ranks && again.value->id == f.value->id,
             "a file does not survive encoding");
}

}  // namespace cudakit::fuzz
