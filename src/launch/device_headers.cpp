// The device headers' text, generated from include/cudakit/device/ at configure time.
#include "cudakit/device_headers.hpp"

#include <string>

namespace cudakit {

namespace {
const DeviceHeader texts[] = {
#include "device_header_texts.inc"
};
}  // namespace

std::span<const DeviceHeader> device_headers() noexcept { return texts; }

Program& add_device_headers(Program& program) {
  for (const DeviceHeader& h : texts) program.header(std::string(h.include_name), std::string(h.text));
  return program;
}

}  // namespace cudakit
