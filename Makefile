# The two commands of the README's quick start, and a few more.
#   make test     build, then run every test (unit, device tests skip without a GPU)
#   make doctor   build, then run `cudakit doctor`
# Both install what is missing first (scripts/ensure-deps.sh).
PRESET ?= default
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps configure build test doctor info sanitize clean

all: build

deps:
	@scripts/ensure-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

doctor: build
	@$(BUILD_DIR)/tools/cudakit doctor

info: build
	@$(BUILD_DIR)/tools/cudakit info

# The sanitizer builds of the unit tests (CI runs these through `make test`).
sanitize: deps
	@cmake --preset asan >/dev/null && cmake --build --preset asan -j $(JOBS) && ctest --preset asan -j $(JOBS)
	@cmake --preset tsan >/dev/null && cmake --build --preset tsan -j $(JOBS) && ctest --preset tsan -j $(JOBS)

clean:
	rm -rf build build-debug build-asan build-tsan
