// The safetensors reader and writer (safetensors.hpp).
#include "safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <system_error>

namespace decoder {

namespace {

constexpr std::size_t header_length_bytes = 8;
// The format's own limit on the header, which also keeps a corrupt length from asking
// for gigabytes.
constexpr std::size_t max_header_bytes = 100'000'000;
// The header is three levels deep (tensors, their fields, a shape); deeper JSON is refused
// while it is parsed, so that nothing recurses over a depth an attacker chooses.
constexpr int max_json_depth = 16;
// JSON quoted in a message is cut to this many characters.
constexpr std::size_t max_quoted_json = 80;

std::string where(const std::string& file) { return "safetensors file " + file + ": "; }

Dtype parse_dtype(const std::string& name, const std::string& tensor, const std::string& file) {
  if (name == "BF16") return Dtype::bf16;
  if (name == "F32") return Dtype::f32;
  if (name == "I32") return Dtype::i32;
  throw SafetensorsError(where(file) + "tensor '" + tensor + "' has dtype '" + name +
                         "', which this reader does not know (BF16, F32, I32)");
}

// A JSON value as a message quotes it: at most max_quoted_json characters.
std::string quoted(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > max_quoted_json) text = text.substr(0, max_quoted_json) + "...";
  return text;
}

// The product of a shape's dimensions, or nullopt when it overflows 64 bits or a
// dimension is above 2^63 - 1.
std::optional<std::uint64_t> element_count(const std::vector<std::uint64_t>& shape) {
  std::uint64_t product = 1;
  for (std::uint64_t d : shape)
    if (d > std::uint64_t(std::numeric_limits<std::int64_t>::max()) || __builtin_mul_overflow(product, d, &product))
      return std::nullopt;
  return product;
}

std::uint64_t read_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

TensorInfo parse_tensor(const std::string& name, const nlohmann::json& entry, const std::string& file) {
  using nlohmann::json;
  auto field = [&](const char* key) -> const json& {
    auto it = entry.find(key);
    if (it == entry.end())
      throw SafetensorsError(where(file) + "tensor '" + name + "' has no '" + key + "'");
    return *it;
  };
  if (!entry.is_object()) throw SafetensorsError(where(file) + "tensor '" + name + "' is not a JSON object");
  TensorInfo t;
  t.name = name;
  const json& dtype = field("dtype");
  if (!dtype.is_string()) throw SafetensorsError(where(file) + "tensor '" + name + "': 'dtype' is not a string");
  t.dtype = parse_dtype(dtype.get<std::string>(), name, file);
  const json& shape = field("shape");
  if (!shape.is_array()) throw SafetensorsError(where(file) + "tensor '" + name + "': 'shape' is not an array");
  std::vector<std::uint64_t> dims;
  for (const json& d : shape) {
    if (!d.is_number_unsigned())
      throw SafetensorsError(where(file) + "tensor '" + name + "': 'shape' holds " + quoted(d) + ", not a dimension");
    dims.push_back(d.get<std::uint64_t>());
  }
  const std::optional<std::uint64_t> elements = element_count(dims);
  std::uint64_t expected = 0;
  if (!elements || __builtin_mul_overflow(*elements, std::uint64_t{dtype_size(t.dtype)}, &expected))
    throw SafetensorsError(where(file) + "tensor '" + name + "': shape " + quoted(shape) +
                           " has more elements than 64 bits count (or a dimension of 2^63 or more)");
  t.shape.assign(dims.begin(), dims.end());
  const json& offsets = field("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw SafetensorsError(where(file) + "tensor '" + name + "': 'data_offsets' is " + quoted(offsets) +
                           ", not [begin, end]");
  const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
  if (end < begin)
    throw SafetensorsError(where(file) + "tensor '" + name + "': data_offsets end " + std::to_string(end) +
                           " is before begin " + std::to_string(begin));
  t.offset = begin;
  t.bytes = end - begin;
  if (expected != t.bytes)
    throw SafetensorsError(where(file) + "tensor '" + name + "' is " + std::to_string(t.bytes) + " bytes, but " +
                           dtype_name(t.dtype) + " of shape " + quoted(shape) + " needs " + std::to_string(expected));
  return t;
}

}  // namespace

const char* dtype_name(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::bf16: return "BF16";
    case Dtype::f32: return "F32";
    case Dtype::i32: return "I32";
  }
  return "?";
}

std::size_t dtype_size(Dtype dtype) noexcept { return dtype == Dtype::bf16 ? 2 : 4; }

std::int64_t TensorInfo::elements() const noexcept {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

SafetensorsWriter& SafetensorsWriter::add(std::string name, Dtype dtype, std::vector<std::int64_t> shape,
                                          std::span<const std::byte> bytes) {
  if (name.empty() || name == "__metadata__")
    throw SafetensorsError("safetensors writer: '" + name + "' is not a tensor name");
  if (std::any_of(tensors_.begin(), tensors_.end(), [&](const TensorInfo& t) { return t.name == name; }))
    throw SafetensorsError("safetensors writer: a tensor named '" + name + "' was already added");
  TensorInfo t{std::move(name), dtype, std::move(shape), data_.size(), bytes.size()};
  const bool negative = std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d < 0; });
  const std::optional<std::uint64_t> elements =
      negative ? std::nullopt : element_count(std::vector<std::uint64_t>(t.shape.begin(), t.shape.end()));
  std::uint64_t expected = 0;
  if (!elements || __builtin_mul_overflow(*elements, std::uint64_t{dtype_size(dtype)}, &expected) ||
      expected != bytes.size())
    throw SafetensorsError("safetensors writer: tensor '" + t.name + "' is given " + std::to_string(bytes.size()) +
                           " bytes, but its dtype and shape need " + std::to_string(expected));
  data_.insert(data_.end(), bytes.begin(), bytes.end());
  tensors_.push_back(std::move(t));
  return *this;
}

SafetensorsWriter& SafetensorsWriter::metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
  return *this;
}

std::string SafetensorsWriter::header() const {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  for (const TensorInfo& t : tensors_)
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.offset, t.offset + t.bytes}}};
  return h.dump();
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  std::string json = header();
  // Spaces after the JSON so that the data starts 8-byte aligned (the format allows them).
  json.append((header_length_bytes - (header_length_bytes + json.size()) % header_length_bytes) % header_length_bytes,
              ' ');
  unsigned char length[header_length_bytes];
  for (std::size_t i = 0; i < header_length_bytes; ++i) length[i] = static_cast<unsigned char>(json.size() >> (8 * i));

  std::filesystem::path temporary = path;
  temporary += ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(length), header_length_bytes);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    out.write(reinterpret_cast<const char*>(data_.data()), static_cast<std::streamsize>(data_.size()));
    out.close();
    if (!out) throw SafetensorsError("safetensors writer: cannot write " + temporary.string());
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) throw SafetensorsError("safetensors writer: cannot rename " + temporary.string() + " to " +
                                    path.string() + ": " + error.message());
}

Safetensors Safetensors::parse_header(const std::string& json, std::size_t data_bytes, const std::string& file) {
  nlohmann::json header;
  const auto bounded_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > max_json_depth)
      throw SafetensorsError(where(file) + "the header nests JSON deeper than " + std::to_string(max_json_depth) +
                             " levels (a safetensors header needs 3)");
    return true;
  };
  try {
    header = nlohmann::json::parse(json, bounded_depth);
  } catch (const nlohmann::json::exception& e) {
    throw SafetensorsError(where(file) + "the header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw SafetensorsError(where(file) + "the header is not a JSON object");
  Safetensors s;
  s.data_bytes_ = data_bytes;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw SafetensorsError(where(file) + "'__metadata__' is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) throw SafetensorsError(where(file) + "metadata '" + k + "' is not a string");
        s.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    s.tensors_.push_back(parse_tensor(key, value, file));
  }
  std::sort(s.tensors_.begin(), s.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.offset < b.offset; });
  std::size_t next = 0;
  for (const TensorInfo& t : s.tensors_) {
    if (t.offset != next)
      throw SafetensorsError(where(file) + "tensor '" + t.name + "' starts at byte " + std::to_string(t.offset) +
                             " of the data, but the tensors before it end at " + std::to_string(next) +
                             " (the data must hold the tensors back to back)");
    next = t.offset + t.bytes;
  }
  if (next != data_bytes)
    throw SafetensorsError(where(file) + "the tensors cover " + std::to_string(next) + " bytes, but the data has " +
                           std::to_string(data_bytes));
  return s;
}

namespace {

// The header's length, read from the first 8 bytes of a file of `size` bytes and checked
// against the file and the format's limit.
std::uint64_t header_length(const unsigned char (&length)[header_length_bytes], std::uint64_t size,
                            const std::string& file) {
  const std::uint64_t header_bytes = read_le64(length);
  if (header_bytes > max_header_bytes || header_bytes > size - header_length_bytes)
    throw SafetensorsError(where(file) + "says its header is " + std::to_string(header_bytes) +
                           " bytes, but the file has " + std::to_string(size - header_length_bytes) + " after the length");
  return header_bytes;
}

[[noreturn]] void too_short(std::uint64_t size, const std::string& file) {
  throw SafetensorsError(where(file) + "is " + std::to_string(size) + " bytes, too short for the header length");
}

}  // namespace

Safetensors Safetensors::open(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SafetensorsError(where(file) + "cannot be opened");
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) throw SafetensorsError(where(file) + "cannot read its size: " + error.message());
  unsigned char length[header_length_bytes];
  if (size < header_length_bytes || !in.read(reinterpret_cast<char*>(length), header_length_bytes))
    too_short(size, file);
  const std::uint64_t header_bytes = header_length(length, size, file);
  std::string json(header_bytes, '\0');
  if (!in.read(json.data(), static_cast<std::streamsize>(header_bytes)))
    throw SafetensorsError(where(file) + "cannot read its header");
  Safetensors s = parse_header(json, size - header_length_bytes - header_bytes, file);
  s.path_ = path;
  s.data_start_ = header_length_bytes + header_bytes;
  return s;
}

Safetensors Safetensors::parse_file(std::span<const std::byte> bytes, const std::string& file) {
  if (bytes.size() < header_length_bytes) too_short(bytes.size(), file);
  unsigned char length[header_length_bytes];
  std::memcpy(length, bytes.data(), header_length_bytes);
  const std::uint64_t header_bytes = header_length(length, bytes.size(), file);
  std::string json(reinterpret_cast<const char*>(bytes.data()) + header_length_bytes, header_bytes);
  Safetensors s = parse_header(json, bytes.size() - header_length_bytes - header_bytes, file);
  s.data_start_ = header_length_bytes + header_bytes;
  return s;
}

bool Safetensors::contains(const std::string& name) const noexcept {
  return std::any_of(tensors_.begin(), tensors_.end(), [&](const TensorInfo& t) { return t.name == name; });
}

const TensorInfo& Safetensors::tensor(const std::string& name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return t;
  throw SafetensorsError(where(path_.string()) + "has no tensor named '" + name + "'");
}

void Safetensors::read_data(std::span<std::byte> destination) const {
  if (destination.size() != data_bytes_)
    throw SafetensorsError(where(path_.string()) + "its data is " + std::to_string(data_bytes_) +
                           " bytes, the destination " + std::to_string(destination.size()));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_));
  if (!in || !in.read(reinterpret_cast<char*>(destination.data()), static_cast<std::streamsize>(destination.size())))
    throw SafetensorsError(where(path_.string()) + "cannot read its data");
}

std::vector<std::byte> Safetensors::read_data() const {
  std::vector<std::byte> data(data_bytes_);
  read_data(data);
  return data;
}

std::vector<std::byte> Safetensors::read_tensor(const std::string& name) const {
  const TensorInfo& t = tensor(name);
  std::vector<std::byte> data(t.bytes);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + t.offset));
  if (!in || !in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size())))
    throw SafetensorsError(where(path_.string()) + "cannot read tensor '" + name + "'");
  return data;
}

}  // namespace decoder
