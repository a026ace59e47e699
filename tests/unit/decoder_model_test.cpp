// The decoder workload's host side: its safetensors reader and writer (a round trip, and
// every malformed file it refuses), and the model's weights and inputs (shapes, layout,
// bf16 rounding, reproducible random values).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "model.hpp"
#include "safetensors.hpp"
#include "../fuzz/safetensors_target.hpp"

namespace {

namespace fs = std::filesystem;
using decoder::Dtype;
using decoder::Safetensors;
using decoder::SafetensorsError;
using decoder::SafetensorsWriter;

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("cudakit_decoder_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng());
  return v;
}

template <class T>
std::span<const std::byte> bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

// A file made of a header text and `data_bytes` bytes of data.
fs::path file_with_header(const std::string& name, const std::string& header, std::size_t data_bytes,
                          std::uint64_t claimed_length = 0) {
  fs::path path = scratch(name);
  std::ofstream out(path, std::ios::binary);
  std::uint64_t length = claimed_length ? claimed_length : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(length >> (8 * i)));
  out << header << std::string(data_bytes, '\x5a');
  return path;
}

void expect_refused(const fs::path& path, const std::string& words) {
  try {
    Safetensors::open(path);
    ADD_FAILURE() << path << " was accepted";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << "names the file: " << e.what();
  }
}

TEST(DecoderSafetensors, RoundTripKeepsEveryTensorsBytesShapeAndDtypeAndTheMetadata) {
  const auto a = random_values<std::uint16_t>(6 * 5, 1);
  const auto b = random_values<std::int32_t>(7, 2);
  const auto c = random_values<std::uint32_t>(3 * 2 * 4, 3);
  SafetensorsWriter out;
  out.add("a", Dtype::bf16, {6, 5}, bytes(a)).add("b", Dtype::i32, {7}, bytes(b)).add("c", Dtype::f32, {3, 2, 4}, bytes(c));
  out.metadata("layers", "8").metadata("note", "random");
  const fs::path path = scratch("round_trip.safetensors");
  out.write(path);

  Safetensors in = Safetensors::open(path);
  ASSERT_EQ(in.tensors().size(), 3u);
  EXPECT_EQ(in.tensor("a").dtype, Dtype::bf16);
  EXPECT_EQ(in.tensor("a").shape, (std::vector<std::int64_t>{6, 5}));
  EXPECT_EQ(in.tensor("c").shape, (std::vector<std::int64_t>{3, 2, 4}));
  EXPECT_EQ(in.tensor("b").dtype, Dtype::i32);
  EXPECT_EQ(in.metadata().at("layers"), "8");
  EXPECT_EQ(in.metadata().at("note"), "random");
  auto read = [&](const std::string& name) { return in.read_tensor(name); };
  EXPECT_EQ(read("a"), std::vector<std::byte>(bytes(a).begin(), bytes(a).end()));
  EXPECT_EQ(read("b"), std::vector<std::byte>(bytes(b).begin(), bytes(b).end()));
  EXPECT_EQ(read("c"), std::vector<std::byte>(bytes(c).begin(), bytes(c).end()));
  EXPECT_EQ(in.data_bytes(), a.size() * 2 + b.size() * 4 + c.size() * 4);
  EXPECT_FALSE(in.contains("d"));
  EXPECT_THROW(in.tensor("d"), SafetensorsError);
}

TEST(DecoderSafetensors, DataStartsEightByteAligned) {
  for (int name_length = 1; name_length < 12; ++name_length) {
    const auto v = random_values<std::uint16_t>(3, 4);
    SafetensorsWriter out;
    out.add(std::string(static_cast<std::size_t>(name_length), 'x'), Dtype::bf16, {3}, bytes(v));
    const fs::path path = scratch("aligned.safetensors");
    out.write(path);
    EXPECT_EQ((fs::file_size(path) - v.size() * 2) % 8, 0u) << "name length " << name_length;
    EXPECT_EQ(Safetensors::open(path).read_tensor(std::string(static_cast<std::size_t>(name_length), 'x')),
              std::vector<std::byte>(bytes(v).begin(), bytes(v).end()));
  }
}

TEST(DecoderSafetensors, WriterRefusesBytesThatDisagreeWithTheShapeAndRepeatedNames) {
  const auto v = random_values<std::uint16_t>(6, 5);
  SafetensorsWriter out;
  EXPECT_THROW(out.add("a", Dtype::bf16, {7}, bytes(v)), SafetensorsError);
  EXPECT_THROW(out.add("a", Dtype::f32, {6}, bytes(v)), SafetensorsError);
  out.add("a", Dtype::bf16, {2, 3}, bytes(v));
  EXPECT_THROW(out.add("a", Dtype::bf16, {6}, bytes(v)), SafetensorsError);
  EXPECT_THROW(out.add("__metadata__", Dtype::bf16, {6}, bytes(v)), SafetensorsError);
}

TEST(DecoderSafetensors, ReaderRefusesMalformedFilesNamingWhatIsWrong) {
  const std::string good = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NO_THROW(Safetensors::open(file_with_header("good.safetensors", good, 8)));
  {
    fs::path path = scratch("short.safetensors");
    std::ofstream(path, std::ios::binary) << "abc";
    expect_refused(path, "too short");
  }
  expect_refused(file_with_header("long_header.safetensors", good, 8, 1u << 20), "header is 1048576 bytes");
  expect_refused(file_with_header("not_json.safetensors", "{not json", 8), "not valid JSON");
  expect_refused(file_with_header("array.safetensors", "[1,2]", 8), "not a JSON object");
  expect_refused(file_with_header("dtype.safetensors", R"({"t":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2),
                 "dtype 'F8'");
  expect_refused(file_with_header("no_shape.safetensors", R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8),
                 "no 'shape'");
  expect_refused(file_with_header("size.safetensors", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                 "needs 12");
  expect_refused(file_with_header("gap.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                  12),
                 "back to back");
  expect_refused(file_with_header("short_data.safetensors", good, 4), "the data has 4");
  expect_refused(file_with_header("offsets.safetensors", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8),
                 "not [begin, end]");
  expect_refused(file_with_header("metadata.safetensors", R"({"__metadata__":{"k":1}})", 0), "metadata 'k'");
  expect_refused(scratch("missing.safetensors"), "cannot be opened");
}

// Inputs the fuzzer and crafted attacks found (tests/fuzz/corpus/safetensors keeps them too).
TEST(DecoderSafetensors, ReaderRefusesShapesWhoseSizeOverflowsAndDeeplyNestedJson) {
  // [2^32, 2^32]: 2^64 elements wrap to 0, which would match an empty tensor.
  expect_refused(file_with_header("wrap.safetensors",
                                  R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
                 "has more elements than 64 bits count");
  // 2^63 and 2^64 - 1: dimensions that a signed 64-bit count reads as negative.
  for (const char* dim : {"9223372036854775808", "18446744073709551615"})
    expect_refused(file_with_header("big_dim.safetensors",
                                    std::string(R"({"t":{"dtype":"BF16","shape":[)") + dim +
                                        R"(],"data_offsets":[0,0]}})",
                                    0),
                   "or a dimension of 2^63 or more");
  // An element count that fits, but not once multiplied by the dtype's size.
  expect_refused(file_with_header("bytes_wrap.safetensors",
                                  R"({"t":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0),
                 "has more elements than 64 bits count");
  // A shape nested 100,000 levels deep: refused while parsing, and the message quotes
  // nothing of it.
  const std::string deep = R"({"t":{"dtype":"F32","shape":)" + std::string(100000, '[') + std::string(100000, ']') +
                           R"(,"data_offsets":[0,0]}})";
  expect_refused(file_with_header("deep.safetensors", deep, 0), "nests JSON deeper than 16 levels");
  // A long value is quoted only in part.
  const std::string wide = R"({"t":{"dtype":"F32","shape":["x)" + std::string(10000, 'y') + R"("],"data_offsets":[0,0]}})";
  try {
    Safetensors::open(file_with_header("wide.safetensors", wide, 0));
    ADD_FAILURE() << "accepted";
  } catch (const SafetensorsError& e) {
    EXPECT_LT(std::string(e.what()).size(), 400u) << e.what();
    EXPECT_NE(std::string(e.what()).find("yyy...,"), std::string::npos) << e.what();
  }
}

TEST(DecoderSafetensors, ParsingBytesInMemoryChecksWhatOpeningTheFileChecks) {
  const std::string header = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::vector<std::byte> file(8 + header.size() + 8, std::byte{0x5a});
  for (int i = 0; i < 8; ++i) file[i] = static_cast<std::byte>(header.size() >> (8 * i));
  std::memcpy(file.data() + 8, header.data(), header.size());
  auto s = Safetensors::parse_file(file, "memory");
  EXPECT_EQ(s.tensor("t").bytes, 8u);
  EXPECT_EQ(s.data_bytes(), 8u);
  file.pop_back();
  EXPECT_THROW(Safetensors::parse_file(file, "memory"), SafetensorsError);
  EXPECT_THROW(Safetensors::parse_file(std::span(file).first(7), "memory"), SafetensorsError);
  file[7] = std::byte{0x7f};  // a header length near 2^63
  EXPECT_THROW(Safetensors::parse_file(file, "memory"), SafetensorsError);
}

TEST(DecoderSafetensors, TheFuzzCorpusReplaysWithoutABrokenInvariant) {
  std::size_t files = 0;
  for (const auto& entry :
       fs::directory_iterator(std::string(CUDAKIT_SOURCE_DIR) + "/tests/fuzz/corpus/safetensors")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    EXPECT_NO_THROW(cudakit::fuzz::safetensors_one_input(std::as_bytes(std::span(bytes)))) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 5u);
}

TEST(DecoderModel, WeightSpecsHaveTheWorkloadsShapes) {
  const decoder::Config c;
  const auto specs = decoder::weight_specs(c);
  ASSERT_EQ(specs.size(), 2u + 12u * 8 + 3);
  std::int64_t total = 0, per_step = 0;
  for (const auto& s : specs) {
    total += s.elements();
    if (s.name != "embed.weight" && s.name != "position.weight") per_step += s.elements();
    EXPECT_NE(s.std, 0.0f) << s.name << ": no tensor is left at a constant";
  }
  auto find = [&](const std::string& name) {
    for (const auto& s : specs)
      if (s.name == name) return s.shape;
    ADD_FAILURE() << "no " << name;
    return std::vector<std::int64_t>{};
  };
  EXPECT_EQ(find("layers.0.attn.qkv.weight"), (std::vector<std::int64_t>{3072, 1024}));
  EXPECT_EQ(find("layers.7.ffn.up.weight"), (std::vector<std::int64_t>{4096, 1024}));
  EXPECT_EQ(find("layers.7.ffn.down.weight"), (std::vector<std::int64_t>{1024, 4096}));
  EXPECT_EQ(find("lm_head.weight"), (std::vector<std::int64_t>{16384, 1024}));
  EXPECT_EQ(find("position.weight"), (std::vector<std::int64_t>{1024, 1024}));
  // About 200 MB of bf16 weights per decode step: 8 layers of 12.6 M and a 16.8 M LM head.
  EXPECT_EQ(per_step, 8 * (3 * 1024 * 1024 + 3072 + 1024 * 1024 + 1024 + 2 * 4096 * 1024 + 4096 + 1024 + 4 * 1024) +
                          2 * 1024 + 16384 * 1024);
  EXPECT_EQ(total, per_step + 16384 * 1024 + 1024 * 1024);
}

TEST(DecoderModel, Bf16RoundsToNearestEven) {
  EXPECT_EQ(decoder::to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(decoder::to_bf16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even pattern (1.0).
  EXPECT_EQ(decoder::to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: up to the even one.
  EXPECT_EQ(decoder::to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(decoder::to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(decoder::from_bf16(decoder::to_bf16(std::nanf("")))));
  EXPECT_EQ(decoder::from_bf16(0x3f81), 1.0f + std::ldexp(1.0f, -7));
}

decoder::Config small_config() {
  decoder::Config c;
  c.layers = 2, c.d_model = 64, c.heads = 1, c.head_dim = 64, c.ffn = 128, c.vocab = 96, c.max_positions = 16;
  return c;
}

TEST(DecoderModel, RandomWeightsAreReproducibleAndFollowTheirSpecs) {
  const decoder::Config c = small_config();
  const auto a = decoder::random_weights(c, 7), b = decoder::random_weights(c, 7), other = decoder::random_weights(c, 8);
  EXPECT_EQ(a.values, b.values);
  EXPECT_NE(a.values, other.values);
  const auto specs = decoder::weight_specs(c);
  ASSERT_EQ(a.layout.size(), specs.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& t = a.layout[i];
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.offset, offset);
    offset += t.bytes;
    double sum = 0, squares = 0;
    const std::size_t n = t.bytes / 2;
    for (std::size_t e = 0; e < n; ++e) {
      const double v = decoder::from_bf16(a.values[t.offset / 2 + e]);
      sum += v, squares += v * v;
    }
    const double mean = sum / n, sd = std::sqrt(squares / n - mean * mean);
    EXPECT_NEAR(mean, specs[i].mean, 4 * specs[i].std / std::sqrt(double(n)) + 1e-3) << t.name;
    EXPECT_NEAR(sd, specs[i].std, 0.25 * specs[i].std) << t.name;
  }
  EXPECT_EQ(offset, a.values.size() * 2);
}

TEST(DecoderModel, WeightsAndInputsReadBackAsWritten) {
  const decoder::Config c = small_config();
  const auto weights = decoder::random_weights(c);
  decoder::write_weights(weights, scratch("weights.safetensors"));
  const auto back = decoder::read_weights(scratch("weights.safetensors"));
  EXPECT_EQ(back.config, c);
  EXPECT_EQ(back.values, weights.values);
  ASSERT_EQ(back.layout.size(), weights.layout.size());
  for (std::size_t i = 0; i < back.layout.size(); ++i) EXPECT_EQ(back.layout[i].offset, weights.layout[i].offset);

  const auto inputs = decoder::random_inputs(c, 3, 5, 4);
  for (auto t : inputs.prompts) EXPECT_TRUE(t >= 0 && t < c.vocab);
  decoder::write_inputs(inputs, scratch("inputs.safetensors"));
  const auto in = decoder::read_inputs(scratch("inputs.safetensors"));
  EXPECT_EQ(in.sequences, 3);
  EXPECT_EQ(in.prompt_length, 5);
  EXPECT_EQ(in.forced_steps, 4);
  EXPECT_EQ(in.prompts, inputs.prompts);
  EXPECT_EQ(in.forced, inputs.forced);
}

TEST(DecoderModel, ReadingWeightsOfAnotherModelNamesTheTensor) {
  decoder::Config c = small_config();
  auto weights = decoder::random_weights(c);
  auto renamed = std::find_if(weights.layout.begin(), weights.layout.end(),
                              [](const auto& t) { return t.name == "layers.0.attn.qkv.weight"; });
  ASSERT_NE(renamed, weights.layout.end());
  renamed->name = "layers.0.attn.qkv.weightx";
  decoder::write_weights(weights, scratch("renamed.safetensors"));
  try {
    decoder::read_weights(scratch("renamed.safetensors"));
    ADD_FAILURE() << "accepted";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("layers.0.attn.qkv.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
