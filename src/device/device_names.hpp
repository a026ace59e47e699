// Internal: what error messages need from the device layer, without a dependency cycle.
#pragma once
#include <string>

namespace cudakit::detail {
/// The device's name if it was already queried (or can be now without throwing); "" otherwise.
std::string device_name_for_messages(int ordinal) noexcept;
}  // namespace cudakit::detail
