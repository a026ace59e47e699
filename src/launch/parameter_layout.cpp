// Kernel parameter layouts from a cubin's .nv.info sections (parameter_layout.hpp).
//
// The records are nvcc's own format, not documented by NVIDIA but stable across releases
// and read by every binary tool (cuobjdump -elf prints them):
//   .nv.info.<kernel>  a sequence of attributes, each starting with a format byte and an
//                      attribute byte: format 4 ("size value") is followed by a 16-bit size
//                      and that many bytes; formats 1 to 3 carry a 16-bit value (4 bytes
//                      in all).
//   EIATTR_KPARAM_INFO (0x17, 12 bytes): u32 index, u16 ordinal, u16 offset, u32 whose
//                      bits 18-31 are the size in bytes. One record per parameter.
//   EIATTR_CBANK_PARAM_SIZE (0x19, a 16-bit value): the bytes all parameters span.
// Everything is bounds-checked: whatever does not fit is not read, and a kernel whose
// records do not describe parameters 0..n-1 once each is left out.
#include "launch/parameter_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace cudakit::detail {

namespace {

constexpr std::uint32_t fatbin_magic = 0xBA55ED50u;
constexpr std::uint16_t fatbin_entry_elf = 2;
constexpr std::size_t fatbin_entry_flags_offset = 40;
// Entry flags of a compressed payload (the older and the newer compression).
constexpr std::uint64_t fatbin_compressed_flags = 0x2000u | 0x8000u;

constexpr std::uint8_t format_size_value = 4;
constexpr std::uint8_t attribute_kparam_info = 0x17;
constexpr std::uint8_t attribute_cbank_param_size = 0x19;
constexpr std::string_view info_prefix = ".nv.info.";

// Bounds-checked reads of a byte range: nullopt past its end.
class Bytes {
 public:
  explicit Bytes(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::size_t size() const { return bytes_.size(); }
  template <class T>
  std::optional<T> at(std::uint64_t offset) const {
    if (offset > bytes_.size() || bytes_.size() - offset < sizeof(T)) return std::nullopt;
    T v{};
    std::memcpy(&v, bytes_.data() + offset, sizeof(T));  // little-endian hosts only, as CUDA is
    return v;
  }
  std::optional<std::span<const std::byte>> range(std::uint64_t offset, std::uint64_t size) const {
    if (offset > bytes_.size() || bytes_.size() - offset < size) return std::nullopt;
    return bytes_.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(size));
  }

 private:
  std::span<const std::byte> bytes_;
};

struct Section {
  std::uint32_t name = 0;
  std::uint64_t offset = 0, size = 0;
};

// The parameters one .nv.info.<kernel> section describes, or nullopt when its records do
// not describe parameters 0..n-1 exactly once each.
std::optional<std::vector<ParameterInfo>> parameters_in(Bytes info) {
  std::vector<std::optional<ParameterInfo>> by_ordinal;
  std::optional<std::size_t> total;
  std::uint64_t at = 0;
  while (at + 4 <= info.size()) {
    auto format = *info.at<std::uint8_t>(at);
    auto attribute = *info.at<std::uint8_t>(at + 1);
    auto value = *info.at<std::uint16_t>(at + 2);
    if (format != format_size_value) {
      if (attribute == attribute_cbank_param_size) total = value;
      at += 4;
      continue;
    }
    auto data = info.range(at + 4, value);
    if (!data) return std::nullopt;
    Bytes record(*data);
    if (attribute == attribute_kparam_info) {
      auto ordinal = record.at<std::uint16_t>(4);
      auto offset = record.at<std::uint16_t>(6);
      auto bits = record.at<std::uint32_t>(8);
      if (!ordinal || !offset || !bits) return std::nullopt;
      if (*ordinal >= by_ordinal.size()) by_ordinal.resize(*ordinal + 1u);
      if (by_ordinal[*ordinal]) return std::nullopt;  // described twice
      by_ordinal[*ordinal] = ParameterInfo{*offset, *bits >> 18};
    }
    at += 4 + value;
  }
  std::vector<ParameterInfo> params;
  for (const auto& p : by_ordinal) {
    if (!p || p->size == 0) return std::nullopt;  // a gap, or a size this reader does not understand
    params.push_back(*p);
  }
  // The stated total covers every parameter (and there is none when it is zero).
  std::size_t end = params.empty() ? 0 : params.back().offset + params.back().size;
  if (total && *total < end) return std::nullopt;
  if (total && *total > 0 && params.empty()) return std::nullopt;
  return params;
}

void read_cubin(Bytes elf, ParameterLayouts& layouts) {
  if (elf.size() < 64 || std::memcmp(elf.range(0, 4)->data(), "\x7f" "ELF", 4) != 0) return;
  auto shoff = elf.at<std::uint64_t>(40);
  auto shentsize = elf.at<std::uint16_t>(58), shnum = elf.at<std::uint16_t>(60), shstrndx = elf.at<std::uint16_t>(62);
  if (!shoff || !shentsize || !shnum || !shstrndx || *shentsize < 40 || *shstrndx >= *shnum) return;
  std::vector<Section> sections;
  for (std::uint16_t i = 0; i < *shnum; ++i) {
    std::uint64_t h = *shoff + std::uint64_t(i) * *shentsize;
    auto name = elf.at<std::uint32_t>(h);
    auto offset = elf.at<std::uint64_t>(h + 24), size = elf.at<std::uint64_t>(h + 32);
    if (!name || !offset || !size) return;
    sections.push_back({*name, *offset, *size});
  }
  auto strings = elf.range(sections[*shstrndx].offset, sections[*shstrndx].size);
  if (!strings) return;
  std::string_view names(reinterpret_cast<const char*>(strings->data()), strings->size());
  for (const Section& s : sections) {
    if (s.name >= names.size()) continue;
    std::string_view name = names.substr(s.name);
    name = name.substr(0, name.find('\0'));
    if (!name.starts_with(info_prefix) || name.size() == info_prefix.size()) continue;
    std::string kernel(name.substr(info_prefix.size()));
    if (layouts.contains(kernel)) continue;  // another cubin of the fatbin said it already
    auto body = elf.range(s.offset, s.size);
    if (!body) continue;
    if (auto params = parameters_in(Bytes(*body))) layouts.emplace(std::move(kernel), std::move(*params));
  }
}

void read_fatbin(Bytes fatbin, ParameterLayouts& layouts) {
  auto header_bytes = fatbin.at<std::uint16_t>(6);
  auto entries_bytes = fatbin.at<std::uint64_t>(8);
  if (!header_bytes || !entries_bytes) return;
  auto entries = fatbin.range(*header_bytes, *entries_bytes);
  if (!entries) return;
  Bytes e(*entries);
  std::uint64_t at = 0;
  while (at + 48 <= e.size()) {
    auto kind = *e.at<std::uint16_t>(at);
    auto entry_header = *e.at<std::uint32_t>(at + 4);
    auto payload_bytes = *e.at<std::uint64_t>(at + 8);
    auto flags = *e.at<std::uint64_t>(at + fatbin_entry_flags_offset);
    auto payload = e.range(at + entry_header, payload_bytes);
    if (entry_header < 48 || !payload) return;
    if (kind == fatbin_entry_elf && (flags & fatbin_compressed_flags) == 0) read_cubin(Bytes(*payload), layouts);
    at += entry_header + payload_bytes;
  }
}

}  // namespace

ParameterLayouts read_parameter_layouts(std::span<const std::byte> image) {
  ParameterLayouts layouts;
  Bytes bytes(image);
  auto magic = bytes.at<std::uint32_t>(0);
  if (magic && *magic == fatbin_magic) read_fatbin(bytes, layouts);
  else read_cubin(bytes, layouts);
  return layouts;
}

}  // namespace cudakit::detail
