// The worker's side of the light kernel API (<kloop/light_api.h>, version
// 2): kloop tensors over ATen tensors, and a module built against that
// header driven as an ordinary ModuleRunner.
//
// Every kloop_tensor the worker hands out owns one reference to an
// at::Tensor kept alive by it. An output is its owner's storage seen with
// the view's sizes, strides and offset, checked to lie inside it and to
// keep the owner's dtype and device.
#pragma once

#include <kloop/kernel_api.h>
#include <kloop/light_abi.h>

#include <memory>
#include <string>

namespace kloop {

// The light entry points of a loaded module.
struct LightEntryPoints {
  kloop_light_create_fn create = nullptr;
  kloop_light_forward_fn forward = nullptr;
  kloop_light_destroy_fn destroy = nullptr;
};

// Constructs the module; throws std::runtime_error with the module's own
// message when its constructor fails. `stream` is the cudaStream_t the
// session times on, or null on CPU.
std::unique_ptr<ModuleRunner> make_light_module(const LightEntryPoints& entry, const ModuleInit& init,
                                                const std::string& device, void* stream);

// The conversions, exposed for tests: an ATen tensor as a kloop_tensor
// counting one reference, and a kloop_tensor (whose reference the caller
// keeps) back as a view of its owner's storage.
kloop_tensor light_from_aten(const at::Tensor& t);
at::Tensor light_to_aten(const kloop_tensor& t);
void light_release(const kloop_tensor& t);

}  // namespace kloop
