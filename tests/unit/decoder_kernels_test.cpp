// The decoder's kernels compiled with the real NVRTC for Hopper, without a GPU: the
// program compiles both with and without early triggers, the switch changes what it says,
// and the GEMV's weight words are loaded before its wait for the kernel before it (the
// overlap programmatic dependent launch is for), and the GEMVs multiply on the tensor
// cores. Whether the kernels compute the right values is the device tests'
// (tests/device/decoder_device_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "kernels.hpp"
#include "nvrtc_present.hpp"

namespace {

using cudakit::CompileOptions;
using cudakit::ProgramOutput;

std::string ptx_of(bool early_trigger) {
  auto program = decoder::Kernels::compile_program(
      decoder::Config{}, early_trigger, {.arch = "compute_90", .output = ProgramOutput::ptx, .use_cache = false});
  return std::string(reinterpret_cast<const char*>(program.image().data()));
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The PTX of one kernel: from its .entry to the next one.
std::string entry(const std::string& ptx, const std::string& name) {
  const auto begin = ptx.find(".entry " + name + "(");
  if (begin == std::string::npos) return {};
  const auto end = ptx.find(".entry ", begin + 1);
  return ptx.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(DecoderKernels, CompileToCubinForHopperWithAndWithoutEarlyTriggers) {
  SKIP_WITHOUT_NVRTC();
  for (bool early : {true, false}) {
    auto program = decoder::Kernels::compile_program(decoder::Config{}, early, {.arch = "sm_90", .use_cache = false});
    EXPECT_GT(program.image().size(), 1000u) << "early triggers " << early;
  }
}

TEST(DecoderKernels, EarlyTriggersLetEveryStepKernelsDependentsLaunchAtItsStart) {
  SKIP_WITHOUT_NVRTC();
  const std::string early = ptx_of(true), late = ptx_of(false);
  for (const char* kernel :
       {"embed_layer_norm", "layer_norm", "decode_attention", "decode_attention_few", "argmax_tokens", "gemv_bias",
        "gemv_logits", "gemv_embed", "gemv_bias_wide", "gemv_logits_wide", "gemv_embed_wide", "gemv_qkv_attend",
        "gemv_embed_attend", "chain_link"}) {
    const std::string e = entry(early, kernel);
    ASSERT_FALSE(e.empty()) << kernel;
    const auto trigger = e.find("griddepcontrol.launch_dependents"), wait = e.find("griddepcontrol.wait");
    ASSERT_NE(trigger, std::string::npos) << kernel << " never lets its dependents launch";
    EXPECT_LT(trigger, wait) << kernel << ": the trigger comes before the wait";
  }
  // Without them only the GEMVs trigger, once their sums are in shared memory, and the
  // kernel-chain floor's link, once its reads are done.
  EXPECT_EQ(count(late, "griddepcontrol.launch_dependents"), 9);
  EXPECT_EQ(count(entry(late, "layer_norm"), "griddepcontrol.launch_dependents"), 0);
}

TEST(DecoderKernels, TheGemvsLoadTheirWeightWordsBeforeWaitingForTheKernelBefore) {
  SKIP_WITHOUT_NVRTC();
  for (bool early : {true, false}) {
    const std::string ptx = ptx_of(early);
    for (const char* kernel : {"gemv_bias", "gemv_logits", "gemv_embed", "gemv_bias_wide", "gemv_logits_wide", "gemv_embed_wide",
                                "gemv_qkv_attend", "gemv_embed_attend"}) {
      const std::string gemv = entry(ptx, kernel);
      const auto wait = gemv.find("griddepcontrol.wait");
      ASSERT_NE(wait, std::string::npos) << kernel;
      // Four 16-byte words a lane (every word of this model's widest rows) are in flight first.
      EXPECT_GE(count(gemv.substr(0, wait), "ld.global.v4.u32"), 4) << kernel << ", early triggers " << early;
    }
  }
}

TEST(DecoderKernels, TheGemvsMultiplyOnTheTensorCores) {
  SKIP_WITHOUT_NVRTC();
  const std::string ptx = ptx_of(true);
  for (const char* kernel : {"gemv_bias", "gemv_logits", "gemv_embed", "gemv_bias_wide", "gemv_logits_wide", "gemv_embed_wide",
                                "gemv_qkv_attend", "gemv_embed_attend"}) {
    const std::string gemv = entry(ptx, kernel);
    // Two mmas a 16-byte weight word, bf16 inputs and fp32 sums.
    EXPECT_GE(count(gemv, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), 2) << kernel;
  }
}

// The LM head's GEMV makes the greedy choice itself: each block offers its best column of
// each row with a 64-bit atomic max, counts itself done, and the last block takes the
// keys (an exchange that resets them for the next step). The other GEMVs do none of it.
TEST(DecoderKernels, TheLmHeadsGemvMakesTheGreedyChoiceItself) {
  SKIP_WITHOUT_NVRTC();
  const std::string ptx = ptx_of(true);
  for (const char* kernel : {"gemv_logits", "gemv_logits_wide"}) {
    const std::string gemv = entry(ptx, kernel);
    EXPECT_GE(count(gemv, "atom.global.max.u64"), 1) << kernel;
    EXPECT_GE(count(gemv, "atom.global.add.u64"), 1) << kernel;
    EXPECT_GE(count(gemv, "atom.global.exch.b64"), 1) << kernel;
  }
  for (const char* kernel : {"gemv_bias", "gemv_embed"}) EXPECT_EQ(count(entry(ptx, kernel), "atom.global"), 0) << kernel;
}

// The QKV GEMVs with the attention fused in count their blocks a head and read this
// step's q, k and v through L2 only (other blocks wrote them during the kernel); the
// plain GEMVs do neither.
TEST(DecoderKernels, TheFusedQkvGemvsRunTheAttentionInTheLastBlockOfEachHead) {
  SKIP_WITHOUT_NVRTC();
  const std::string ptx = ptx_of(true);
  for (const char* kernel : {"gemv_qkv_attend", "gemv_embed_attend"}) {
    const std::string gemv = entry(ptx, kernel);
    ASSERT_FALSE(gemv.empty()) << kernel;
    EXPECT_GE(count(gemv, "atom.global.add.u32"), 1) << kernel;
    EXPECT_GE(count(gemv, "ld.global.cg.v4.u32"), 3) << kernel;
  }
  for (const char* kernel : {"gemv_bias", "gemv_embed"}) {
    EXPECT_EQ(count(entry(ptx, kernel), "ld.global.cg"), 0) << kernel;
    EXPECT_EQ(count(entry(ptx, kernel), "atom.global"), 0) << kernel;
  }
}

// 16-byte loads between a kernel's first barrier (this step's key and value are in the
// cache) and its second (the scores' maximum): the key loads, and in the "few" variant
// the first pass's value loads as well.
int loads_before_the_softmax(const std::string& kernel) {
  const auto first = kernel.find("bar.sync");
  const auto second = kernel.find("bar.sync", first + 1);
  if (first == std::string::npos || second == std::string::npos) return -1;
  return count(kernel.substr(first, second - first), "ld.global.v4.u32");
}

TEST(DecoderKernels, TheSmallGridAttentionLoadsItsValuesWithItsKeys) {
  SKIP_WITHOUT_NVRTC();
  const std::string ptx = ptx_of(true);
  const int plain = loads_before_the_softmax(entry(ptx, "decode_attention"));
  const int few = loads_before_the_softmax(entry(ptx, "decode_attention_few"));
  ASSERT_GT(plain, 0);
  EXPECT_GE(few, plain + 8) << "the first pass's 8 value words a thread are in flight with its keys";
}

// The GEMV's launch on an H200's shared memory (227 KiB a block): one group of 8 columns
// at one row, more groups at more rows where x is staged whole, one group where it
// comes in slices; the grid covers n_out either way.
TEST(DecoderKernels, AGemvBlockComputesMoreColumnGroupsAtMoreRows) {
  decoder::Kernels k;
  k.shared_memory_optin = 227 * 1024;
  struct Case {
    int rows, n_out, k_in, groups, warps, slice;
  };
  for (const Case c : {Case{1, 3072, 1024, 1, 4, 128}, Case{2, 16384, 1024, 2, 8, 128}, Case{5, 3072, 1024, 4, 16, 128},
                       Case{4, 4096, 1024, 2, 8, 128}, Case{8, 4096, 1024, 4, 16, 128}, Case{16, 1024, 1024, 4, 16, 128},
                       Case{32, 16384, 1024, 4, 16, 128}, Case{8, 1024, 4096, 1, 16, 512},
                       Case{32, 1024, 4096, 1, 13, 416}, Case{16, 8, 1024, 1, 4, 128}}) {
    const decoder::Kernels::GemvLaunch g = k.gemv_launch(c.rows, c.n_out, c.k_in);
    const std::string at = std::to_string(c.rows) + " rows, " + std::to_string(c.n_out) + " x " + std::to_string(c.k_in);
    EXPECT_EQ(g.groups, c.groups) << at;
    EXPECT_EQ(g.config.block.x, static_cast<unsigned>(32 * c.warps)) << at;
    EXPECT_EQ(g.config.grid.x * 8 * static_cast<unsigned>(g.groups), static_cast<unsigned>(c.n_out)) << at;
    EXPECT_EQ(g.slice, c.slice) << at;
    EXPECT_EQ(g.config.shared_memory_bytes, static_cast<std::size_t>(c.rows) * 16 * (c.slice + 4)) << at;
  }
  // The cap (CUDAKIT_DECODER_GEMV_GROUPS) holds at every row count.
  k.gemv_groups_cap = 1;
  EXPECT_EQ(k.gemv_launch(32, 16384, 1024).groups, 1);
  k.gemv_groups_cap = 4;
  EXPECT_EQ(k.gemv_launch(1, 16384, 1024).groups, 4);
  EXPECT_EQ(k.gemv_launch(1, 16384, 1024).config.block.x, 512u);
}

// The attention rides in the QKV GEMV at one row where that GEMV's block is the fused
// attention's 128 threads (or 256: two groups of columns at widths up to 1024), and not
// by default.
TEST(DecoderKernels, TheAttentionIsFusedIntoTheQkvGemvAtOneRowInBlocksOfItsThreads) {
  decoder::Kernels k;
  k.shared_memory_optin = 227 * 1024;
  EXPECT_FALSE(k.takes_fused_attention(1, 1024)) << "the attention keeps its own kernel by default";
  k.fused_attention_threads = 128;
  EXPECT_TRUE(k.takes_fused_attention(1, 1024));
  EXPECT_TRUE(k.takes_fused_attention(1, 256));
  EXPECT_EQ(k.qkv_launch(1, 1024).config.block.x, 128u);
  EXPECT_FALSE(k.takes_fused_attention(2, 1024)) << "a head's last block would attend for every sequence";
  EXPECT_FALSE(k.takes_fused_attention(1, 2048)) << "8 warps a group of columns";
  k.fused_attention_threads = 256;
  for (int d_model : {256, 1024, 2048}) {
    EXPECT_TRUE(k.takes_fused_attention(1, d_model)) << d_model;
    EXPECT_EQ(k.qkv_launch(1, d_model).config.block.x, 256u) << d_model;
    EXPECT_EQ(k.qkv_launch(1, d_model).config.grid.x * 8 * static_cast<unsigned>(k.qkv_launch(1, d_model).groups),
              3u * static_cast<unsigned>(d_model));
  }
  EXPECT_EQ(k.qkv_launch(4, 1024).groups, k.gemv_launch(4, 3072, 1024).groups) << "the fused attention's only at one row";
  k.fused_attention_threads = 0;
  EXPECT_FALSE(k.takes_fused_attention(1, 1024));
}

// The longest context the kernels take compiles: every decode attention's scores, the
// fused QKV GEMVs' beside the GEMV's own sums, fit the static shared memory.
TEST(DecoderKernels, TheLongestContextTheyTakeCompiles) {
  SKIP_WITHOUT_NVRTC();
  decoder::Config long_context;
  long_context.max_positions = decoder::Kernels::max_positions;
  auto program = decoder::Kernels::compile_program(long_context, true, {.arch = "sm_90", .use_cache = false});
  EXPECT_GT(program.image().size(), 1000u);
}

TEST(DecoderKernels, AShapeTheKernelsDoNotCoverIsRefusedBeforeCompiling) {
  decoder::Config odd;
  odd.d_model = 1020;
  EXPECT_THROW(decoder::Kernels::compile_program(odd, true, {.arch = "sm_90"}), cudakit::InvalidArgument);
  decoder::Config wide_heads;
  wide_heads.head_dim = 128;
  EXPECT_THROW(decoder::Kernels::compile_program(wide_heads, true, {.arch = "sm_90"}), cudakit::InvalidArgument);
  decoder::Config long_context;
  long_context.max_positions = decoder::Kernels::max_positions + 1;
  EXPECT_THROW(decoder::Kernels::compile_program(long_context, true, {.arch = "sm_90"}), cudakit::InvalidArgument);
}

}  // namespace


// At one row the GEMVs pass x's words between lanes by shuffles (it is held in registers);
// CUDAKIT_DECODER_STAGED_ROW=1 compiles them without that path, staging every row.
TEST(DecoderKernels, AtOneRowTheGemvsShuffleXBetweenLanesUnlessTheRowIsStaged) {
  SKIP_WITHOUT_NVRTC();
  auto ptx = [](bool in_registers) {
    auto program = decoder::Kernels::compile_program(
        decoder::Config{}, true, {.arch = "compute_90", .output = ProgramOutput::ptx, .use_cache = false},
        in_registers);
    return std::string(reinterpret_cast<const char*>(program.image().data()));
  };
  const std::string registers = ptx(true), staged = ptx(false);
  for (const char* kernel : {"gemv_bias", "gemv_embed", "gemv_logits"}) {
    EXPECT_GT(count(entry(registers, kernel), "shfl.sync.idx"), 0) << kernel;
    EXPECT_EQ(count(entry(staged, kernel), "shfl.sync.idx"), 0) << kernel;
  }
}
