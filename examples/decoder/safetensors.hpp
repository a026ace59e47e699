// A small reader and writer of the safetensors format, for the decoder's weights and
// inputs: the files that both this program and the PyTorch script load.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON, then the tensors'
// bytes. The JSON maps each tensor's name to {"dtype", "shape", "data_offsets": [begin,
// end]} (offsets into the data that follows the header), plus an optional "__metadata__"
// object of strings. Tensors lie back to back in the data, without gaps; the writer pads
// the header with spaces so that the data starts 8-byte aligned.
//
//   decoder::SafetensorsWriter out;
//   out.metadata("layers", "8");
//   out.add("embed.weight", decoder::Dtype::bf16, {16384, 1024}, bytes);
//   out.write("weights.safetensors");
//
//   decoder::Safetensors in = decoder::Safetensors::open("weights.safetensors");
//   const decoder::TensorInfo& t = in.tensor("embed.weight");   // dtype, shape, offset, bytes
//   std::vector<std::byte> data = in.read_data();               // every tensor's bytes
//
// Errors: a file that is not safetensors (too short, a header length beyond the file,
// invalid JSON, a missing or malformed field, an unknown dtype, a size that disagrees with
// dtype and shape, offsets with gaps, overlaps or beyond the data) throws
// SafetensorsError naming the file and what is wrong. So do a shape whose element count
// overflows 64 bits, a dimension of 2^63 or more, and JSON nested deeper than 16 levels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace decoder {

/// The element types the decoder's files use.
enum class Dtype { bf16, f32, i32 };

/// "BF16", "F32", "I32": the format's names.
const char* dtype_name(Dtype dtype) noexcept;
/// Bytes per element.
std::size_t dtype_size(Dtype dtype) noexcept;

/// A file that is not valid safetensors, or a tensor it does not have.
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One tensor of a file: where its bytes are in the data that follows the header.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<std::int64_t> shape;
  std::size_t offset = 0;  // from the start of the data, in bytes
  std::size_t bytes = 0;

  /// The number of elements (the product of the shape; 1 for a scalar).
  std::int64_t elements() const noexcept;
};

/// Collects tensors and metadata, then writes them as one safetensors file.
class SafetensorsWriter {
 public:
  /// Adds a tensor; its bytes are copied. Throws SafetensorsError when the byte count is
  /// not the shape's element count times the dtype's size, or the name is taken.
  SafetensorsWriter& add(std::string name, Dtype dtype, std::vector<std::int64_t> shape,
                         std::span<const std::byte> bytes);
  /// A metadata entry ("__metadata__" in the header).
  SafetensorsWriter& metadata(std::string key, std::string value);
  /// The header's JSON text (without the length and the padding).
  std::string header() const;
  /// Writes the file (a temporary file renamed into place, so a reader never sees half of
  /// it). Throws SafetensorsError when the file cannot be written.
  void write(const std::filesystem::path& path) const;

 private:
  std::vector<TensorInfo> tensors_;
  std::vector<std::byte> data_;
  std::map<std::string, std::string> metadata_;
};

/// A safetensors file's header, read and checked; the data is read on request.
class Safetensors {
 public:
  /// Reads and checks the header (see above for what throws).
  static Safetensors open(const std::filesystem::path& path);

  /// The tensors in the order of their offsets.
  const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  /// One tensor; SafetensorsError naming the file when it has none of that name.
  const TensorInfo& tensor(const std::string& name) const;
  /// Whether the file has a tensor of that name.
  bool contains(const std::string& name) const noexcept;
  /// The metadata entries.
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  /// The bytes of the data section (every tensor, back to back).
  std::size_t data_bytes() const noexcept { return data_bytes_; }
  /// Reads the whole data section into `destination` (exactly data_bytes() long).
  void read_data(std::span<std::byte> destination) const;
  /// The same into a new vector.
  std::vector<std::byte> read_data() const;
  /// One tensor's bytes.
  std::vector<std::byte> read_tensor(const std::string& name) const;

  /// Parses a header's JSON (`file` names the source in messages).
  static Safetensors parse_header(const std::string& json, std::size_t data_bytes, const std::string& file);
  /// Checks a whole file's bytes as open() checks the file (the fuzz target's entry; the
  /// result reads no data: it has no path).
  static Safetensors parse_file(std::span<const std::byte> bytes, const std::string& file);

 private:
  std::filesystem::path path_;
  std::size_t data_start_ = 0;
  std::size_t data_bytes_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace decoder
