# The two commands of the README's quick start, and a few more.
#   make test     build, then run every test (unit, device tests skip without a GPU),
#                 then each fuzz target for FUZZ_SECONDS (30; FUZZ=0 skips them),
#                 then the unit tests again under ASan+UBSan and under TSan
#                 (make test SANITIZE=0 skips those; CI runs them)
#   make doctor   build the library and the command only (build-doctor/, kernels for this
#                 machine's GPUs, or for the newest architecture without one), then run
#                 `cudakit doctor`: the short path on a fresh machine
#   make info     the same build, then `cudakit info`
#   make fuzz     only the fuzz targets (tests/fuzz; clang's libFuzzer)
# Both install what is missing first (scripts/ensure-deps.sh).
PRESET ?= default
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
SANITIZE ?= 1
DOCTOR_DIR := build-doctor
FUZZ ?= 1
FUZZ_SECONDS ?= 30

# The sanitizer runtimes cannot map their shadow memory on kernels that randomize mmap
# with 32 bits (vm.mmap_rnd_bits = 32): TSan then dies with "unexpected memory mapping".
# Running the sanitized tests without address randomization avoids that, where the
# machine allows it (a container's seccomp profile may not).
NO_ASLR := $(shell setarch $$(uname -m) -R true >/dev/null 2>&1 && echo setarch $$(uname -m) -R)

.PHONY: all deps configure build test doctor doctor-build info docs sanitize sanitize-run fuzz fuzz-run clean

all: build

deps:
	@scripts/ensure-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	@ctest --preset $(PRESET) -j $(JOBS)
ifneq ($(FUZZ),0)
	@$(MAKE) --no-print-directory fuzz-run
endif
ifneq ($(SANITIZE),0)
	@$(MAKE) --no-print-directory sanitize-run
endif

doctor: doctor-build
	@$(DOCTOR_DIR)/tools/cudakit doctor

info: doctor-build
	@$(DOCTOR_DIR)/tools/cudakit info

doctor-build: deps
	@cmake --preset doctor >/dev/null
	@cmake --build --preset doctor -j $(JOBS)

# The API reference: HTML from the public headers into $(BUILD_DIR)/docs/html (Doxygen,
# installed from the distribution when missing).
docs:
	@command -v doxygen >/dev/null || scripts/ensure-deps.sh --docs
	@mkdir -p $(BUILD_DIR)/docs
	@CUDAKIT_DOCS_OUT=$(BUILD_DIR)/docs CUDAKIT_SOURCE_DIR=$(CURDIR) doxygen docs/Doxyfile
	@echo "API reference: $(BUILD_DIR)/docs/html/index.html ($$(grep -c warning $(BUILD_DIR)/docs/warnings.txt) Doxygen warnings in $(BUILD_DIR)/docs/warnings.txt)"

# The sanitizer builds of the unit tests (CI runs these through `make test`): g++'s
# AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer included), then its
# ThreadSanitizer. Each build also runs canaries that must be reported (tests/CMakeLists.txt).
sanitize: deps sanitize-run

sanitize-run:
	@echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@cmake --preset asan >/dev/null && cmake --build --preset asan -j $(JOBS) && $(NO_ASLR) ctest --preset asan -j $(JOBS)
	@echo "== unit tests under ThreadSanitizer"
	@cmake --preset tsan >/dev/null && cmake --build --preset tsan -j $(JOBS) && $(NO_ASLR) ctest --preset tsan -j $(JOBS)

# The libFuzzer targets (tests/fuzz/CMakeLists.txt): every parser of outside bytes, built
# with clang in build-fuzz, each run for FUZZ_SECONDS from its committed seed corpus; any
# finding fails the run and leaves its input in build-fuzz/findings/.
fuzz: deps fuzz-run

fuzz-run:
	@echo "== fuzz targets, $(FUZZ_SECONDS) s each (clang: libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer)"
	@cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCUDAKIT_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null && cmake --build build-fuzz -j $(JOBS) && $(NO_ASLR) ctest --test-dir build-fuzz --output-on-failure -j $(JOBS)

clean:
	rm -rf build build-debug build-doctor build-asan build-tsan build-fuzz
