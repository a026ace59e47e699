// Every input of the fuzz targets' committed corpus (tests/fuzz/corpus/<target>/), the
// inputs that crashed a parser included, replayed through the same target bodies in the
// ordinary build: no invariant breaks, nothing escapes but the parser's own refusal (and
// the sanitizer builds run these too). The safetensors corpus: decoder_model_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "../fuzz/ipc_descriptor_target.hpp"
#include "../fuzz/module_image_target.hpp"
#include "../fuzz/rendezvous_file_target.hpp"
#include "../fuzz/rendezvous_messages_target.hpp"

namespace cudakit {
namespace {

// Each file of a target's corpus, read whole.
std::vector<std::pair<std::string, std::vector<unsigned char>>> corpus(const std::string& target) {
  std::vector<std::pair<std::string, std::vector<unsigned char>>> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CUDAKIT_SOURCE_DIR) + "/tests/fuzz/corpus/" + target)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files.emplace_back(entry.path().filename().string(),
                       std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {}));
  }
  return files;
}

TEST(FuzzCorpus, ModuleImagesReplayWithoutABrokenInvariant) {
  auto files = corpus("module_image");
  ASSERT_GE(files.size(), 8u);
  for (const auto& [name, bytes] : files)
    EXPECT_NO_THROW(fuzz::module_image_one_input(std::as_bytes(std::span(bytes)))) << name;
}

TEST(FuzzCorpus, RendezvousMessagesReplayWithoutABrokenInvariant) {
  auto files = corpus("rendezvous_messages");
  ASSERT_GE(files.size(), 5u);
  for (const auto& [name, bytes] : files) EXPECT_NO_THROW(fuzz::rendezvous_messages_one_input(bytes)) << name;
}

TEST(FuzzCorpus, RendezvousFilesReplayWithoutABrokenInvariant) {
  auto files = corpus("rendezvous_file");
  ASSERT_GE(files.size(), 4u);
  for (const auto& [name, bytes] : files) EXPECT_NO_THROW(fuzz::rendezvous_file_one_input(bytes)) << name;
}

TEST(FuzzCorpus, IpcDescriptorsReplayWithoutABrokenInvariant) {
  auto files = corpus("ipc_descriptor");
  ASSERT_GE(files.size(), 8u);
  for (const auto& [name, bytes] : files)
    EXPECT_NO_THROW(fuzz::ipc_descriptor_one_input(std::as_bytes(std::span(bytes)))) << name;
}

}  // namespace
}  // namespace cudakit
