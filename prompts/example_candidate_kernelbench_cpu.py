import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_source = """
#include <torch/extension.h>

torch::Tensor add_cpu(torch::Tensor a, torch::Tensor b) {
    auto x = a.contiguous();
    auto y = b.contiguous();
    auto out = torch::empty_like(x);
    const float* pa = x.data_ptr<float>();
    const float* pb = y.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = x.numel();
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
    });
    return out;
}
"""

add_module = load_inline(
    name="elementwise_add",
    cpp_sources=add_source,
    functions=["add_cpu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_module.add_cpu(a, b)
