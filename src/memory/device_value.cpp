// DeviceValue's refusal inside a capture (device_value.hpp).
#include "cudakit/device_value.hpp"

#include <string>

#include "cudakit/error.hpp"

namespace cudakit::detail {

void throw_device_value_set_while_capturing(StreamRef stream) {
  throw CaptureError("DeviceValue::set on " +
                     describe(Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal())) +
                     ", which is capturing: the graph would write this one value at every replay; set the value "
                     "before running the graph, outside the captured work (a graph that advances the value itself "
                     "does it with a kernel that writes it)");
}

}  // namespace cudakit::detail
