// KernelBench level 2, task 16: ConvTranspose2d, Mish, add a constant, Hardtanh [-1, 1], scaling.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  double add_value;
  double scale;
  explicit Model(const kloop::ModuleInit& init)
      : add_value(init.arg_float("add_value")), scale(init.arg_float("scale")) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))
                                       .output_padding(init.arg_int("output_padding"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = torch::mish(y);
    y = y + add_value;
    y = torch::hardtanh(y, /*min_val=*/-1, /*max_val=*/1);
    return y * scale;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
