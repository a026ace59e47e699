// Fuzz body: the TCP rendezvous's messages (src/libraries/rendezvous_wire.cpp), as rank 0
// and the other ranks decode what a connection sent. A message that decodes encodes back
// to the same bytes; a reply read piece by piece (reply_bytes_after, as a rank reads it)
// never asks for more than a reply can hold.
#pragma once

#include <algorithm>
#include <span>

#include "fuzz_check.hpp"
#include "libraries/rendezvous_wire.hpp"

namespace cudakit::fuzz {

inline void rendezvous_messages_one_input(std::span<const unsigned char> bytes) {
  namespace wire = nccl::wire;
  if (auto c = wire::decode_challenge(bytes); c.value) {
    auto again = wire::encode_challenge(*c.value);
    fuzz_check(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()), "a challenge re-encodes differently");
  } else {
    fuzz_check(!c.problem.empty(), "a refused challenge without a reason");
  }
  if (auto h = wire::decode_hello(bytes); h.value) {
    auto again = wire::encode_hello(*h.value);
    fuzz_check(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()), "a hello re-encodes differently");
  } else {
    fuzz_check(!h.problem.empty(), "a refused hello without a reason");
  }
  (void)wire::could_begin_hello(bytes);
  // A reply as a rank reads it: a byte, then what reply_bytes_after asks for, up to the
  // bytes there are.
  std::size_t have = 0;
  while (have <= bytes.size()) {
    auto more = wire::reply_bytes_after(bytes.first(have));
    if (!more || *more == 0) break;
    fuzz_check(*more <= wire::id_reply_bytes + wire::max_failure_text, "a reply asks for " + std::to_string(*more));
    have += *more;
  }
  if (auto r = wire::decode_reply(bytes.first(std::min(have, bytes.size()))); r.value) {
    fuzz_check(r.value->text.size() <= wire::max_failure_text, "a failure text beyond the limit");
    for (char ch : r.value->text) fuzz_check(ch >= 0x20 && ch <= 0x7e, "an unprintable byte in a failure text");
  }
  fuzz_check(wire::printable(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), 16).size() <=
                 16,
             "printable() longer than its limit");
}

}  // namespace cudakit::fuzz
