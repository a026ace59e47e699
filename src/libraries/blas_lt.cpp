// BlasLt (blas_lt.hpp): matmuls with epilogues as declared work, planned once per shape.
#include "cudakit/blas_lt.hpp"

#include <string>

#include "cudakit/declared_work.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/blas_shapes.hpp"
#include "libraries/handle_pool.hpp"
#include "libraries/lt_handle.hpp"

namespace cudakit {

namespace {

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::none: return "none";
    case Epilogue::bias: return "bias";
    case Epilogue::relu: return "relu";
    case Epilogue::relu_bias: return "relu_bias";
    case Epilogue::gelu: return "gelu";
    case Epilogue::gelu_bias: return "gelu_bias";
  }
  return "?";
}

void check_epilogue(Epilogue epilogue, bool with_bias, std::size_t bias_size, std::int64_t n, int bias_device,
                    int device) {
  const char* operation = "BlasLt::matmul";
  if (static_cast<unsigned>(epilogue) > static_cast<unsigned>(Epilogue::gelu_bias))
    throw InvalidArgument(std::string(operation) + ": unknown epilogue " + std::to_string(static_cast<int>(epilogue)));
  if (has_bias(epilogue) && !with_bias)
    throw InvalidArgument(std::string(operation) + ": Epilogue::" + epilogue_name(epilogue) +
                          " adds a bias, but none was given: use the matmul that takes one");
  if (!has_bias(epilogue) && with_bias)
    throw InvalidArgument(std::string(operation) + ": a bias was given, but Epilogue::" + epilogue_name(epilogue) +
                          " adds none: use Epilogue::bias, relu_bias or gelu_bias");
  if (with_bias && static_cast<std::int64_t>(bias_size) != n)
    throw InvalidArgument(std::string(operation) + ": the bias must have n = " + std::to_string(n) +
                          " elements (one per column of C) but its view has " + std::to_string(bias_size));
  if (with_bias && bias_device >= 0 && bias_device != device)
    throw InvalidArgument(std::string(operation) + ": the bias is on device " + std::to_string(bias_device) +
                          " but the stream is on device " + std::to_string(device));
}

// The handle's plan for `key`: the last matmul's when it had this key, else the cache's,
// else a new one (descriptors built, the heuristic asked). Its descriptor then points at
// `bias`. Nothing here allocates or calls cuBLASLt when the key and the bias repeat.
template <class Describe>
detail::LtPlan& plan_for(detail::LtSlot& slot, const detail::LtPlanKey& key, const void* bias, const Resource& res,
                         const Describe& describe) {
  if (slot.last_plan == nullptr || !(slot.last_key == key)) [[unlikely]] {
    auto found = slot.plans.find(key);
    if (found == slot.plans.end())
      found = slot.plans
                  .emplace(key, std::make_unique<detail::LtPlan>(*slot.api, slot.handle, key,
                                                                 slot.workspace.size_bytes(), bias, res, describe))
                  .first;
    slot.last_key = key;
    slot.last_plan = found->second.get();
  }
  slot.last_plan->use_bias(bias, res, describe);
  return *slot.last_plan;
}

}  // namespace

BlasLt::BlasLt(StreamRef stream)
    : slot_(detail::lease_handle<detail::LtSlot>(stream, "BlasLt").release()), stream_(stream) {}

void BlasLt::reset() noexcept {
  detail::return_handle(std::unique_ptr<detail::LtSlot>(std::exchange(slot_, nullptr)));
  stream_ = {};
}

std::size_t BlasLt::workspace_bytes() const noexcept { return slot_ != nullptr ? slot_->workspace.size_bytes() : 0; }

std::size_t BlasLt::cached_shapes() const noexcept { return slot_ != nullptr ? slot_->plans.size() : 0; }

template <blas_lt_element T>
void BlasLt::matmul_views(DeviceSpan<const T> a, DeviceSpan<const T> b, DeviceSpan<const T> bias, DeviceSpan<T> c,
                          const Gemm& shape, Epilogue epilogue, bool with_bias) {
  const char* operation = "BlasLt::matmul";
  const Resource res = detail::call_resource(slot_, stream_, "BlasLt (moved-from or default-constructed)");
  detail::ExclusiveUse::Guard guard(slot_->use, operation, res);
  const int device = res.device;
  constexpr cudaDataType type = detail::BlasType<T>::data;
  const detail::ColumnMajorGemm& g =
      slot_->last_gemm.check(operation, shape, nullptr, detail::views_of(a, b, c), type, type, device);
  check_epilogue(epilogue, with_bias, bias.size(), shape.n, bias.device_ordinal(), device);
  if (g.empty) return;

  detail::LtSlot& slot = *slot_;
  const cublas::Api& api = *slot.api;
  auto describe = [&] {
    return detail::describe_gemm("matmul", detail::BlasType<T>::name, shape, nullptr) + ", epilogue " +
           epilogue_name(epilogue);
  };
  const void* bias_pointer = with_bias ? static_cast<const void*>(bias.data()) : nullptr;
  const detail::LtPlanKey key =
      detail::LtPlanKey::of(g, type, static_cast<std::uint8_t>(epilogue), b.data(), a.data(), c.data(), bias_pointer);
  detail::LtPlan& plan = plan_for(slot, key, bias_pointer, res, describe);
  const float alpha = static_cast<float>(shape.alpha), beta = static_cast<float>(shape.beta);
  enqueue(stream_, reads(a, b, bias), writes(c, slot.workspace), [&](CUstream s) {
    // cuBLASLt may set itself up on a first call: inside a capture, relaxed mode keeps that
    // out of the graph; the matmul is captured as always.
    detail::CaptureTolerantScope tolerant(device);
    cublasStatus_t status =
        api.LtMatmul(slot.handle, plan.desc(), &alpha, b.data(), plan.first(), a.data(), plan.second(), &beta, c.data(),
                     plan.c(), c.data(), plan.c(), &plan.algorithm(), slot.workspace.data(),
                     slot.workspace.size_bytes(), s);
    detail::check_blas(status, cublas::Entry::LtMatmul, res, describe);
  });
}

template void BlasLt::matmul_views<float>(DeviceSpan<const float>, DeviceSpan<const float>, DeviceSpan<const float>,
                                          DeviceSpan<float>, const Gemm&, Epilogue, bool);
template void BlasLt::matmul_views<__half>(DeviceSpan<const __half>, DeviceSpan<const __half>, DeviceSpan<const __half>,
                                           DeviceSpan<__half>, const Gemm&, Epilogue, bool);
template void BlasLt::matmul_views<__nv_bfloat16>(DeviceSpan<const __nv_bfloat16>, DeviceSpan<const __nv_bfloat16>,
                                                  DeviceSpan<const __nv_bfloat16>, DeviceSpan<__nv_bfloat16>,
                                                  const Gemm&, Epilogue, bool);

}  // namespace cudakit
