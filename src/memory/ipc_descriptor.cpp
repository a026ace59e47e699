#include "cudakit/ipc_descriptor.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace cudakit {

namespace {

constexpr char magic[8] = {'c', 'u', 'd', 'a', 'k', 'i', 't', '\x1f'};
// No device has 256 TiB: a larger size is a forged or corrupted field, refused before
// any arithmetic sees it.
constexpr std::uint64_t largest_bytes = std::uint64_t(1) << 48;

// Field offsets (ipc_descriptor.hpp).
constexpr std::size_t at_magic = 0, at_version = 8, at_kind = 10, at_ledger_slot = 12, at_bytes = 16,
                      at_allocation_bytes = 24, at_uuid = 32, at_payload_bytes = 48, at_ledger_generation = 52,
                      at_payload = 56;
static_assert(at_payload + IpcDescriptor::payload_capacity == IpcDescriptor::encoded_bytes);

template <class T>
void put(std::byte* out, std::size_t at, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}
template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(static_cast<T>(in[at + i]) << (8 * i));
  return value;
}

[[noreturn]] void refuse(const std::string& why) {
  throw IpcError(IpcFailure::malformed, "IPC descriptor refused: " + why);
}

bool known_kind(std::uint16_t kind) {
  return kind == static_cast<std::uint16_t>(IpcKind::memory_pool) ||
         kind == static_cast<std::uint16_t>(IpcKind::pool_allocation) ||
         kind == static_cast<std::uint16_t>(IpcKind::virtual_memory) ||
         kind == static_cast<std::uint16_t>(IpcKind::event) ||
         kind == static_cast<std::uint16_t>(IpcKind::allocation_ledger);
}

// The payload each kind carries: the driver's export data for a pool pointer and the
// IPC handle of an event (both 64 bytes), nothing for a pool and virtual memory (the
// file descriptor is all the importer needs).
std::uint32_t payload_bytes_of(IpcKind kind) {
  return kind == IpcKind::pool_allocation || kind == IpcKind::event ? 64 : 0;
}

void check_sizes(const IpcDescriptor& d) {
  const std::string kind = ipc_kind_name(d.kind);
  if (!d.states_size()) {
    if (d.bytes != 0 || d.allocation_bytes != 0) refuse("a " + kind + " descriptor states a size");
    return;
  }
  if (d.bytes == 0) refuse("a " + kind + " of 0 bytes");
  if (d.bytes > largest_bytes || d.allocation_bytes > largest_bytes)
    refuse("a " + kind + " of " + std::to_string(std::max(d.bytes, d.allocation_bytes)) +
           " bytes (more than 2^48: no device has that much memory)");
  if (d.allocation_bytes < d.bytes)
    refuse("a " + kind + " whose allocation (" + std::to_string(d.allocation_bytes) +
           " bytes) is smaller than the bytes it shares (" + std::to_string(d.bytes) + ")");
  if (d.kind == IpcKind::pool_allocation && d.allocation_bytes != d.bytes)
    refuse("a pool allocation whose allocation size (" + std::to_string(d.allocation_bytes) +
           ") differs from its size (" + std::to_string(d.bytes) + ")");
}

}  // namespace

const char* ipc_kind_name(IpcKind kind) noexcept {
  switch (kind) {
    case IpcKind::memory_pool: return "memory pool";
    case IpcKind::pool_allocation: return "pool allocation";
    case IpcKind::virtual_memory: return "virtual-memory allocation";
    case IpcKind::event: return "event";
    case IpcKind::allocation_ledger: return "allocation ledger";
  }
  return "unknown kind";
}

const char* ipc_failure_name(IpcFailure failure) noexcept {
  switch (failure) {
    case IpcFailure::peer_refused: return "peer_refused";
    case IpcFailure::peer_closed: return "peer_closed";
    case IpcFailure::timed_out: return "timed_out";
    case IpcFailure::malformed: return "malformed";
    case IpcFailure::wrong_kind: return "wrong_kind";
    case IpcFailure::wrong_size: return "wrong_size";
    case IpcFailure::wrong_device: return "wrong_device";
    case IpcFailure::stale: return "stale";
    case IpcFailure::system: return "system";
  }
  return "unknown";
}

std::array<std::byte, IpcDescriptor::encoded_bytes> encode_ipc_descriptor(const IpcDescriptor& d) {
  std::array<std::byte, IpcDescriptor::encoded_bytes> out{};
  std::memcpy(out.data() + at_magic, magic, sizeof magic);
  put<std::uint16_t>(out.data(), at_version, IpcDescriptor::current_version);
  put<std::uint16_t>(out.data(), at_kind, static_cast<std::uint16_t>(d.kind));
  put<std::uint64_t>(out.data(), at_bytes, d.bytes);
  put<std::uint64_t>(out.data(), at_allocation_bytes, d.allocation_bytes);
  std::memcpy(out.data() + at_uuid, d.device_uuid.data(), d.device_uuid.size());
  const std::uint32_t payload_bytes = std::min<std::uint32_t>(d.payload_bytes, IpcDescriptor::payload_capacity);
  put<std::uint32_t>(out.data(), at_payload_bytes, payload_bytes);
  put<std::uint32_t>(out.data(), at_ledger_slot, d.ledger_slot);
  put<std::uint32_t>(out.data(), at_ledger_generation, d.ledger_generation);
  std::memcpy(out.data() + at_payload, d.payload.data(), payload_bytes);
  return out;
}

IpcDescriptor parse_ipc_descriptor(std::span<const std::byte> bytes) {
  if (bytes.size() != IpcDescriptor::encoded_bytes)
    refuse(std::to_string(bytes.size()) + " bytes where a descriptor has " +
           std::to_string(IpcDescriptor::encoded_bytes));
  if (std::memcmp(bytes.data() + at_magic, magic, sizeof magic) != 0) refuse("not a cudakit descriptor (wrong magic)");
  const auto version = get<std::uint16_t>(bytes, at_version);
  if (version != IpcDescriptor::current_version)
    refuse("version " + std::to_string(version) + ", and this cudakit reads version " +
           std::to_string(IpcDescriptor::current_version));
  const auto kind = get<std::uint16_t>(bytes, at_kind);
  if (!known_kind(kind)) refuse("unknown kind " + std::to_string(kind));

  IpcDescriptor d;
  d.kind = static_cast<IpcKind>(kind);
  d.ledger_slot = get<std::uint32_t>(bytes, at_ledger_slot);
  d.ledger_generation = get<std::uint32_t>(bytes, at_ledger_generation);
  if (d.kind == IpcKind::pool_allocation) {
    if (d.ledger_generation == 0) refuse("a pool allocation without its ledger generation");
  } else if (d.ledger_slot != 0 || d.ledger_generation != 0) {
    refuse("a " + std::string(ipc_kind_name(d.kind)) + " with a ledger entry");
  }
  d.bytes = get<std::uint64_t>(bytes, at_bytes);
  d.allocation_bytes = get<std::uint64_t>(bytes, at_allocation_bytes);
  std::memcpy(d.device_uuid.data(), bytes.data() + at_uuid, d.device_uuid.size());
  d.payload_bytes = get<std::uint32_t>(bytes, at_payload_bytes);
  check_sizes(d);
  if (d.payload_bytes != payload_bytes_of(d.kind))
    refuse("a " + std::string(ipc_kind_name(d.kind)) + " with a payload of " + std::to_string(d.payload_bytes) +
           " bytes, where it has " + std::to_string(payload_bytes_of(d.kind)));
  for (std::size_t i = d.payload_bytes; i < IpcDescriptor::payload_capacity; ++i)
    if (bytes[at_payload + i] != std::byte{0}) refuse("a payload byte past the payload's length is not 0");
  std::memcpy(d.payload.data(), bytes.data() + at_payload, d.payload_bytes);
  return d;
}

}  // namespace cudakit
