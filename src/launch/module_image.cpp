#include "cudakit/module_image.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cudakit/error.hpp"

namespace cudakit {

namespace {

// Fatbin container: a 16-byte header, then entries, each a header and a payload.
// (The layout is not documented by NVIDIA; it is the one nvcc and every fatbin reader use.)
constexpr std::uint32_t fatbin_magic = 0xBA55ED50u;
constexpr std::size_t fatbin_header_bytes = 16;  // u32 magic, u16 version, u16 header size, u64 entries size
constexpr std::size_t fatbin_entry_min_bytes = 32;
constexpr std::uint16_t fatbin_entry_ptx = 1;
constexpr std::uint16_t fatbin_entry_elf = 2;
constexpr std::size_t fatbin_entry_arch_offset = 28;  // u32: 90 for sm_90 / compute_90

// ELF64 for EM_CUDA. The architecture sits in e_flags: in the low byte for ABI version 7
// and older, in bits 8-15 from ABI version 8 (CUDA 13 writes version 8 for every arch).
constexpr std::uint16_t em_cuda = 190;
constexpr std::size_t elf64_header_bytes = 64;
// PTX targets: sm_90, sm_100, ...; four digits leave room and cannot overflow an int.
constexpr std::size_t max_arch_digits = 4;
constexpr std::uint32_t max_arch = 10000;

template <class T>
T read(std::span<const std::byte> bytes, std::size_t offset) {
  T v{};
  std::memcpy(&v, bytes.data() + offset, sizeof(T));  // little-endian hosts only, as CUDA is
  return v;
}

[[noreturn]] void fail(const std::string& message) { throw InvalidArgument(message); }

std::string first_bytes(std::span<const std::byte> image) {
  std::string s;
  char buf[8];
  for (std::size_t i = 0; i < image.size() && i < 8; ++i) {
    std::snprintf(buf, sizeof buf, "%s%02x", i ? " " : "", static_cast<unsigned>(image[i]));
    s += buf;
  }
  return s.empty() ? "(no bytes)" : s;
}

void add_unique(std::vector<int>& v, int arch) {
  if (std::find(v.begin(), v.end(), arch) == v.end()) v.push_back(arch);
}

ImageContents inspect_fatbin(std::span<const std::byte> image) {
  if (image.size() < fatbin_header_bytes) fail("truncated fatbin: " + std::to_string(image.size()) + " bytes");
  auto header_bytes = read<std::uint16_t>(image, 6);
  auto entries_bytes = read<std::uint64_t>(image, 8);
  if (header_bytes < fatbin_header_bytes || entries_bytes > image.size() ||
      header_bytes + entries_bytes > image.size())
    fail("truncated fatbin: its header says " + std::to_string(header_bytes + entries_bytes) + " bytes, " +
         std::to_string(image.size()) + " are given");
  ImageContents c;
  c.format = ImageFormat::fatbin;
  c.size = header_bytes + entries_bytes;
  std::size_t offset = header_bytes;
  while (offset + fatbin_entry_min_bytes <= c.size) {
    auto kind = read<std::uint16_t>(image, offset);
    auto entry_header = read<std::uint32_t>(image, offset + 4);
    auto payload = read<std::uint64_t>(image, offset + 8);
    auto arch_number = read<std::uint32_t>(image, offset + fatbin_entry_arch_offset);
    if (entry_header < fatbin_entry_min_bytes || payload > c.size || offset + entry_header + payload > c.size)
      fail("malformed fatbin: the entry at byte " + std::to_string(offset) + " runs past its end");
    if (arch_number >= max_arch)
      fail("malformed fatbin: the entry at byte " + std::to_string(offset) + " names architecture " +
           std::to_string(arch_number) + ", which no GPU has");
    const int arch = static_cast<int>(arch_number);
    if (kind == fatbin_entry_elf) add_unique(c.machine_code, arch);
    if (kind == fatbin_entry_ptx) add_unique(c.ptx, arch);
    offset += entry_header + payload;
  }
  return c;
}

// A header table of `count` entries of `entry_bytes` at `offset` must lie inside the image;
// `end` grows to cover it. The offset comes from the file: an offset near 2^64 must not
// wrap the sum around to a small number.
void table_within(std::span<const std::byte> image, std::uint64_t offset, std::uint16_t entry_bytes,
                  std::uint16_t count, const char* which, std::uint64_t& end) {
  if (count == 0) return;
  const std::uint64_t table_bytes = std::uint64_t(entry_bytes) * count;  // at most 2^32: no overflow
  if (offset > image.size() || table_bytes > image.size() - offset)
    fail("truncated cubin: its " + std::string(which) + " header table (" + std::to_string(count) + " entries of " +
         std::to_string(entry_bytes) + " bytes at byte " + std::to_string(offset) + ") does not lie within its " +
         std::to_string(image.size()) + " bytes");
  end = std::max(end, offset + table_bytes);
}

ImageContents inspect_elf(std::span<const std::byte> image) {
  if (image.size() < elf64_header_bytes) fail("truncated ELF image: " + std::to_string(image.size()) + " bytes");
  if (static_cast<unsigned char>(image[4]) != 2 || static_cast<unsigned char>(image[5]) != 1)
    fail("an ELF image that is not 64-bit little-endian is not a CUDA cubin");
  auto machine = read<std::uint16_t>(image, 18);
  if (machine != em_cuda)
    fail("an ELF image for machine " + std::to_string(machine) + " is not a CUDA cubin (EM_CUDA is 190)");
  auto abi = static_cast<unsigned char>(image[8]);
  auto flags = read<std::uint32_t>(image, 48);
  int arch = static_cast<int>(abi >= 8 ? (flags >> 8) & 0xffu : flags & 0xffu);
  // The extent: the furthest of the header, the program and section header tables.
  auto phoff = read<std::uint64_t>(image, 32);
  auto shoff = read<std::uint64_t>(image, 40);
  auto phentsize = read<std::uint16_t>(image, 54), phnum = read<std::uint16_t>(image, 56);
  auto shentsize = read<std::uint16_t>(image, 58), shnum = read<std::uint16_t>(image, 60);
  std::uint64_t end = elf64_header_bytes;
  table_within(image, phoff, phentsize, phnum, "program", end);
  table_within(image, shoff, shentsize, shnum, "section", end);
  ImageContents c;
  c.format = ImageFormat::cubin;
  c.machine_code.push_back(arch);
  c.size = static_cast<std::size_t>(end);
  return c;
}

bool is_text_byte(unsigned char b) { return b == '\n' || b == '\r' || b == '\t' || (b >= 0x20 && b < 0x7f); }

// PTX is text naming its ISA version and its target: ".target sm_90".
bool inspect_ptx(std::span<const std::byte> image, ImageContents& c) {
  std::size_t n = image.size();
  while (n > 0 && image[n - 1] == std::byte{0}) --n;
  std::string_view text(reinterpret_cast<const char*>(image.data()), n);
  for (char ch : text)
    if (!is_text_byte(static_cast<unsigned char>(ch))) return false;
  if (text.find(".version") == std::string_view::npos) return false;
  c.format = ImageFormat::ptx;
  c.size = n;
  std::size_t t = text.find(".target");
  if (t != std::string_view::npos) {
    t += 7;
    while (t < text.size() && (text[t] == ' ' || text[t] == '\t')) ++t;
    if (text.substr(t, 3) == "sm_" || text.substr(t, 8) == "compute_") {
      const std::string_view prefix = text[t] == 's' ? "sm_" : "compute_";
      t += prefix.size();
      const std::size_t digits_start = t;
      while (t < text.size() && text[t] >= '0' && text[t] <= '9') ++t;
      const std::string_view digits = text.substr(digits_start, t - digits_start);
      // Architectures have a few digits (sm_90, sm_100): a longer number is none, and
      // would overflow the arithmetic.
      if (digits.size() > max_arch_digits)
        fail("PTX with '.target " + std::string(prefix) + std::string(digits.substr(0, 24)) +
             (digits.size() > 24 ? "...'" : "'") + ": no GPU architecture has a number of " +
             std::to_string(digits.size()) + " digits");
      int arch = 0;
      for (char d : digits) arch = arch * 10 + (d - '0');
      if (arch > 0) c.ptx.push_back(arch);
    }
  }
  return true;
}

std::string arch_list(const std::vector<int>& archs, const char* prefix) {
  std::vector<int> sorted = archs;
  std::sort(sorted.begin(), sorted.end());
  std::string s;
  for (std::size_t i = 0; i < sorted.size(); ++i) s += (i ? ", " : "") + std::string(prefix) + std::to_string(sorted[i]);
  return s;
}

bool force_ptx_jit() {
  const char* v = std::getenv("CUDA_FORCE_PTX_JIT");
  return v != nullptr && std::string_view(v) == "1";
}

}  // namespace

const char* to_string(ImageFormat format) noexcept {
  switch (format) {
    case ImageFormat::cubin: return "cubin";
    case ImageFormat::ptx: return "PTX";
    case ImageFormat::fatbin: return "fatbin";
  }
  return "image";
}

const char* to_string(CodeKind kind) noexcept {
  return kind == CodeKind::native ? "native machine code" : "JIT-compiled PTX";
}

std::string ImageContents::describe() const {
  std::string s = to_string(format);
  std::string sass = arch_list(machine_code, "sm_"), ptx_archs = arch_list(ptx, "compute_");
  if (!sass.empty()) s += " with machine code for " + sass;
  if (!ptx_archs.empty()) s += std::string(sass.empty() ? " with" : " and") + " PTX for " + ptx_archs;
  if (sass.empty() && ptx_archs.empty()) s += " with no code this cudakit recognizes";
  return s;
}

ImageContents inspect_image(std::span<const std::byte> image) {
  if (image.size() >= 4 && read<std::uint32_t>(image, 0) == fatbin_magic) return inspect_fatbin(image);
  if (image.size() >= 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0) return inspect_elf(image);
  ImageContents c;
  if (inspect_ptx(image, c)) return c;
  fail("not a module image: neither a cubin (ELF), a fatbin (magic 0xBA55ED50) nor PTX text; it starts with " +
       first_bytes(image) + " (" + std::to_string(image.size()) + " bytes)");
}

CodeChoice choose_code(const ImageContents& contents, ComputeCapability device, JitPolicy policy,
                       const std::string& what) {
  const int gpu = device.number();
  int native = 0, ptx = 0;
  for (int arch : contents.machine_code)
    if (arch / 10 == device.major && arch % 10 <= device.minor) native = std::max(native, arch);
  for (int arch : contents.ptx)
    if (arch <= gpu) ptx = std::max(ptx, arch);
  if (native > 0 && !(ptx > 0 && force_ptx_jit())) return {CodeKind::native, native};

  std::string gpu_words = "a GPU of " + device.arch() + " (compute capability " + std::to_string(device.major) + "." +
                          std::to_string(device.minor) + ")";
  if (ptx > 0) {
    if (policy == JitPolicy::refuse)
      throw InvalidArgument(what + " (" + contents.describe() + ") has no machine code for " + gpu_words +
                            "; only its PTX for compute_" + std::to_string(ptx) +
                            " could run there, JIT-compiled, and JitPolicy::refuse forbids that (build the image "
                            "with -gencode arch=compute_" + std::to_string(gpu) + ",code=sm_" + std::to_string(gpu) +
                            ", or allow JIT)");
    return {CodeKind::jit, ptx};
  }
  throw InvalidArgument(what + " (" + contents.describe() + ") has nothing " + gpu_words +
                        " can run: machine code runs only on GPUs of its own major architecture with an equal or "
                        "newer minor version, and PTX only on GPUs at least as new as its target");
}

}  // namespace cudakit
