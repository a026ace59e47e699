// Sanitizer canaries: each mode commits one planted bug, and its test passes only when
// the sanitizer reports it (tests/CMakeLists.txt). They prove that a sanitizer build
// really checks, so that "zero findings" in the unit tests means something: a runtime
// that silently failed to start (LeakSanitizer under ptrace, TSan under a kernel with
// 32 bits of mmap randomization) turns these tests red instead of the run green.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace {

int use_after_free() {
  int* p = new int[4]{1, 2, 3, 4};
  delete[] p;
  return p[1];  // heap-use-after-free
}

int leak() {
  static void* volatile keep;
  keep = std::malloc(64);
  keep = nullptr;  // the only pointer is gone: a direct leak at exit
  return 0;
}

int signed_overflow(int argc) {
  int big = std::numeric_limits<int>::max() - 2 + argc;  // INT_MAX (argc is 2), unknown to the compiler
  return big + 1;  // signed integer overflow
}

int data_race() {
  static int shared = 0;
  std::thread a([] { for (int i = 0; i < 1000; ++i) ++shared; });
  std::thread b([] { for (int i = 0; i < 1000; ++i) ++shared; });
  a.join();
  b.join();
  return shared > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  if (std::strcmp(mode, "use-after-free") == 0) return use_after_free();
  if (std::strcmp(mode, "leak") == 0) return leak();
  if (std::strcmp(mode, "signed-overflow") == 0) return signed_overflow(argc);
  if (std::strcmp(mode, "data-race") == 0) return data_race();
  std::fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
