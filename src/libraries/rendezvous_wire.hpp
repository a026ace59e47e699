// Internal: the bytes of the rendezvous (bootstrap.hpp), made and checked without a socket,
// a file or a GPU, so that the fuzz targets (tests/fuzz) call the very parsers that rank 0
// and the other ranks run on what arrives from outside.
//
// TCP messages (integers in network byte order):
//   challenge  rank 0 -> a connection: "CKRC", a fresh 32-byte nonce                 36 bytes
//   hello      a rank -> rank 0: "CKRH", ranks (u32), rank (u32), the rank's own      76 bytes
//              32-byte nonce, and its proof: HMAC-SHA-256 under the job secret of
//              "cudakit rendezvous hello", the challenge's nonce, ranks, rank, its nonce
//   reply      rank 0 -> a rank: 'I', the 128 id bytes and rank 0's proof (HMAC of    161 bytes
//              "cudakit rendezvous id", both nonces, ranks, rank and the id); or 'F', a
//              length (u32, at most 4096) and rank 0's error text
// A proof binds a nonce that the other side chose for this connection, so a recorded hello
// or reply is worth nothing on another connection.
//
// The file (text): "cudakit rendezvous\nranks <n>\nid <256 hex digits>\n".
//
// Every decoder takes whole, untrusted bytes and returns the value or the reason it was
// refused; none throws, none reads past what it is given.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cudakit::nccl::wire {

constexpr std::size_t id_bytes = 128, nonce_bytes = 32, proof_bytes = 32;
using IdBytes = std::array<unsigned char, id_bytes>;
using Nonce = std::array<unsigned char, nonce_bytes>;
using Proof = std::array<unsigned char, proof_bytes>;

/// A decoded message, or why the bytes are not one.
template <class T>
struct Decoded {
  std::optional<T> value;
  std::string problem;  // empty when value is set
};

// ---- TCP ----

constexpr std::size_t challenge_bytes = 4 + nonce_bytes;
constexpr std::size_t hello_bytes = 12 + nonce_bytes + proof_bytes;
constexpr std::size_t id_reply_bytes = 1 + id_bytes + proof_bytes;
constexpr std::size_t failure_head_bytes = 5;
constexpr std::size_t max_failure_text = 4096;

std::array<unsigned char, challenge_bytes> encode_challenge(const Nonce& nonce);
Decoded<Nonce> decode_challenge(std::span<const unsigned char> bytes);

struct Hello {
  std::uint32_t ranks = 0, rank = 0;
  Nonce nonce{};
  Proof proof{};
};
std::array<unsigned char, hello_bytes> encode_hello(const Hello& hello);
Decoded<Hello> decode_hello(std::span<const unsigned char> bytes);
/// Whether bytes received so far may still grow into a hello (they start as one does).
bool could_begin_hello(std::span<const unsigned char> start);

/// What a hello's proof covers.
std::vector<unsigned char> hello_proof_text(const Nonce& challenge, std::uint32_t ranks, std::uint32_t rank,
                                            const Nonce& their_nonce);
/// What the id reply's proof covers.
std::vector<unsigned char> id_proof_text(const Nonce& challenge, const Nonce& their_nonce, std::uint32_t ranks,
                                         std::uint32_t rank, const IdBytes& id);

/// Rank 0's reply: the id with its proof, or its error text.
struct Reply {
  bool failed = false;
  IdBytes id{};
  Proof proof{};
  std::string text;  // failed: rank 0's words, made printable
};
std::array<unsigned char, id_reply_bytes> encode_id_reply(const IdBytes& id, const Proof& proof);
std::vector<unsigned char> encode_failure(std::string_view text);
/// The bytes still to read for a reply that starts with `head` (its first byte, then for
/// 'F' its length): 0 once `head` is whole; nullopt for a reply that cannot be one.
std::optional<std::size_t> reply_bytes_after(std::span<const unsigned char> head);
Decoded<Reply> decode_reply(std::span<const unsigned char> bytes);

// ---- the file ----

struct RendezvousFile {
  int ranks = 0;
  IdBytes id{};
};
/// Files larger than this are refused unread.
constexpr std::size_t max_file_bytes = 4096;
std::string encode_file(int ranks, const IdBytes& id);
Decoded<RendezvousFile> decode_file(std::string_view text);

/// `text` cut to `limit` bytes, each byte that is not printable ASCII shown as '?': what
/// another process wrote, safe to put in an error message and on a terminal.
std::string printable(std::string_view text, std::size_t limit = max_failure_text);

}  // namespace cudakit::nccl::wire
