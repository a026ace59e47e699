// The rendezvous's messages and file (rendezvous_wire.hpp).
#include "libraries/rendezvous_wire.hpp"

#include <algorithm>
#include <cstring>

namespace cudakit::nccl::wire {

namespace {

constexpr unsigned char challenge_magic[4] = {'C', 'K', 'R', 'C'};
constexpr unsigned char hello_magic[4] = {'C', 'K', 'R', 'H'};
constexpr std::string_view hello_purpose = "cudakit rendezvous hello";
constexpr std::string_view id_purpose = "cudakit rendezvous id";
constexpr std::string_view file_first_line = "cudakit rendezvous";

void put_u32(unsigned char* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<unsigned char>(v >> (24 - 8 * i));
}
std::uint32_t get_u32(const unsigned char* at) {
  return std::uint32_t(at[0]) << 24 | std::uint32_t(at[1]) << 16 | std::uint32_t(at[2]) << 8 | at[3];
}

void append(std::vector<unsigned char>& out, std::string_view text) { out.insert(out.end(), text.begin(), text.end()); }
template <std::size_t N>
void append(std::vector<unsigned char>& out, const std::array<unsigned char, N>& bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}
void append(std::vector<unsigned char>& out, std::uint32_t v) {
  unsigned char b[4];
  put_u32(b, v);
  out.insert(out.end(), b, b + 4);
}

std::string first_bytes_words(std::span<const unsigned char> bytes) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < bytes.size() && i < 8; ++i) {
    if (i) s += ' ';
    s += hex[bytes[i] >> 4];
    s += hex[bytes[i] & 15];
  }
  return s.empty() ? "nothing" : s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

template <class T>
Decoded<T> refused(std::string problem) {
  return {std::nullopt, std::move(problem)};
}

}  // namespace

std::array<unsigned char, challenge_bytes> encode_challenge(const Nonce& nonce) {
  std::array<unsigned char, challenge_bytes> out{};
  std::memcpy(out.data(), challenge_magic, 4);
  std::memcpy(out.data() + 4, nonce.data(), nonce.size());
  return out;
}

Decoded<Nonce> decode_challenge(std::span<const unsigned char> bytes) {
  if (bytes.size() != challenge_bytes || std::memcmp(bytes.data(), challenge_magic, 4) != 0)
    return refused<Nonce>("it sent " + std::to_string(bytes.size()) + " bytes starting " + first_bytes_words(bytes) +
                          ", not a cudakit rendezvous challenge");
  Nonce n;
  std::memcpy(n.data(), bytes.data() + 4, n.size());
  return {n, {}};
}

std::array<unsigned char, hello_bytes> encode_hello(const Hello& hello) {
  std::array<unsigned char, hello_bytes> out{};
  std::memcpy(out.data(), hello_magic, 4);
  put_u32(out.data() + 4, hello.ranks);
  put_u32(out.data() + 8, hello.rank);
  std::memcpy(out.data() + 12, hello.nonce.data(), nonce_bytes);
  std::memcpy(out.data() + 12 + nonce_bytes, hello.proof.data(), proof_bytes);
  return out;
}

Decoded<Hello> decode_hello(std::span<const unsigned char> bytes) {
  if (bytes.size() < 4 || std::memcmp(bytes.data(), hello_magic, 4) != 0)
    return refused<Hello>("it sent " + std::to_string(bytes.size()) + " bytes starting " + first_bytes_words(bytes) +
                          ", not a cudakit rendezvous hello");
  if (bytes.size() != hello_bytes)
    return refused<Hello>("it sent a hello of " + std::to_string(bytes.size()) + " bytes, not " +
                          std::to_string(hello_bytes));
  Hello h;
  h.ranks = get_u32(bytes.data() + 4);
  h.rank = get_u32(bytes.data() + 8);
  std::memcpy(h.nonce.data(), bytes.data() + 12, nonce_bytes);
  std::memcpy(h.proof.data(), bytes.data() + 12 + nonce_bytes, proof_bytes);
  return {h, {}};
}

bool could_begin_hello(std::span<const unsigned char> start) {
  if (start.empty()) return true;
  return start.size() <= hello_bytes && std::memcmp(start.data(), hello_magic, std::min<std::size_t>(start.size(), 4)) == 0;
}

std::vector<unsigned char> hello_proof_text(const Nonce& challenge, std::uint32_t ranks, std::uint32_t rank,
                                            const Nonce& their_nonce) {
  std::vector<unsigned char> out;
  append(out, hello_purpose);
  append(out, challenge);
  append(out, ranks);
  append(out, rank);
  append(out, their_nonce);
  return out;
}

std::vector<unsigned char> id_proof_text(const Nonce& challenge, const Nonce& their_nonce, std::uint32_t ranks,
                                         std::uint32_t rank, const IdBytes& id) {
  std::vector<unsigned char> out;
  append(out, id_purpose);
  append(out, challenge);
  append(out, their_nonce);
  append(out, ranks);
  append(out, rank);
  append(out, id);
  return out;
}

std::array<unsigned char, id_reply_bytes> encode_id_reply(const IdBytes& id, const Proof& proof) {
  std::array<unsigned char, id_reply_bytes> out{};
  out[0] = 'I';
  std::memcpy(out.data() + 1, id.data(), id.size());
  std::memcpy(out.data() + 1 + id_bytes, proof.data(), proof.size());
  return out;
}

std::vector<unsigned char> encode_failure(std::string_view text) {
  text = text.substr(0, max_failure_text);
  std::vector<unsigned char> out(failure_head_bytes);
  out[0] = 'F';
  put_u32(out.data() + 1, static_cast<std::uint32_t>(text.size()));
  append(out, text);
  return out;
}

std::optional<std::size_t> reply_bytes_after(std::span<const unsigned char> head) {
  if (head.empty()) return 1;
  if (head[0] == 'I') return head.size() <= id_reply_bytes ? std::optional(id_reply_bytes - head.size()) : std::nullopt;
  if (head[0] != 'F') return std::nullopt;
  if (head.size() < failure_head_bytes) return failure_head_bytes - head.size();
  const std::uint32_t length = get_u32(head.data() + 1);
  if (length > max_failure_text || head.size() > failure_head_bytes + length) return std::nullopt;
  return failure_head_bytes + length - head.size();
}

Decoded<Reply> decode_reply(std::span<const unsigned char> bytes) {
  auto rest = reply_bytes_after(bytes);
  if (!rest || *rest != 0 || bytes.empty())
    return refused<Reply>("it sent " + std::to_string(bytes.size()) + " bytes starting " + first_bytes_words(bytes) +
                          ", not the unique id nor an error");
  Reply r;
  if (bytes[0] == 'I') {
    std::memcpy(r.id.data(), bytes.data() + 1, id_bytes);
    std::memcpy(r.proof.data(), bytes.data() + 1 + id_bytes, proof_bytes);
    return {r, {}};
  }
  r.failed = true;
  r.text = printable(std::string_view(reinterpret_cast<const char*>(bytes.data()) + failure_head_bytes,
                                      bytes.size() - failure_head_bytes));
  if (r.text.empty()) r.text = "(no reason given)";
  return {r, {}};
}

std::string encode_file(int ranks, const IdBytes& id) {
  static const char* hex = "0123456789abcdef";
  std::string s = std::string(file_first_line) + "\nranks " + std::to_string(ranks) + "\nid ";
  for (unsigned char b : id) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s + "\n";
}

Decoded<RendezvousFile> decode_file(std::string_view text) {
  if (text.size() > max_file_bytes)
    return refused<RendezvousFile>("it is " + std::to_string(text.size()) + " bytes, more than a rendezvous file's " +
                                   std::to_string(max_file_bytes));
  const std::string_view ranks_key = "\nranks ", id_key = "\nid ";
  if (!text.starts_with(file_first_line) || !text.substr(file_first_line.size()).starts_with(ranks_key))
    return refused<RendezvousFile>("it does not start with \"cudakit rendezvous\\nranks \"");
  std::size_t at = file_first_line.size() + ranks_key.size();
  RendezvousFile f;
  std::size_t digits = 0;
  for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, ++digits) {
    if (digits == 9) return refused<RendezvousFile>("its rank count has more than 9 digits");
    f.ranks = f.ranks * 10 + (text[at] - '0');
  }
  if (digits == 0 || f.ranks < 1) return refused<RendezvousFile>("its rank count is not a positive number");
  if (!text.substr(at).starts_with(id_key)) return refused<RendezvousFile>("its rank count is not followed by the id");
  at += id_key.size();
  if (text.size() - at != 2 * id_bytes + 1 || text.back() != '\n')
    return refused<RendezvousFile>("its id is not 256 hex digits and a newline");
  for (std::size_t i = 0; i < id_bytes; ++i) {
    const int high = hex_value(text[at + 2 * i]), low = hex_value(text[at + 2 * i + 1]);
    if (high < 0 || low < 0) return refused<RendezvousFile>("its id holds a character that is not a hex digit");
    f.id[i] = static_cast<unsigned char>(high << 4 | low);
  }
  return {f, {}};
}

std::string printable(std::string_view text, std::size_t limit) {
  std::string s(text.substr(0, limit));
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return s;
}

}  // namespace cudakit::nccl::wire
