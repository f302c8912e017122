// KernelBench level 1, task 43: MaxPool3d with kernel_size, stride, padding, dilation and ceil_mode.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::MaxPool3d maxpool{nullptr};
  bool return_indices;
  explicit Model(const kloop::ModuleInit& init)
      : return_indices(init.has_arg("return_indices") ? init.arg_bool("return_indices") : false) {
    maxpool = register_module(
        "maxpool", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(init.arg_int("kernel_size"))
                                            .stride(init.arg_int("stride"))
                                            .padding(init.arg_int("padding"))
                                            .dilation(init.arg_int("dilation"))
                                            .ceil_mode(init.has_arg("ceil_mode") ? init.arg_bool("ceil_mode")
                                                                                 : false)));
  }
  std::vector<at::Tensor> forward(const at::Tensor& x) {
    if (return_indices) {
      auto [values, indices] = maxpool->forward_with_indices(x);
      return {values, indices};
    }
    return {maxpool(x)};
  }
};
KLOOP_REGISTER_REFERENCE(Model)
