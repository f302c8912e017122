// KernelBench level 3, task 50: causal multi-head self-attention with ReLU in place of softmax, no output projection applied.
#include <kloop/reference_api.h>

#include <cmath>
#include <limits>

struct Model : torch::nn::Module {
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  at::Tensor bias;  // causal mask, (1, 1, max_seqlen, max_seqlen)
  int64_t n_head, n_embd;
  explicit Model(const kloop::ModuleInit& init)
      : n_head(init.arg_int("n_head")), n_embd(init.arg_int("n_embd")) {
    const int64_t max_seqlen = init.arg_int("max_seqlen");
    c_attn = register_module("c_attn", torch::nn::Linear(n_embd, 3 * n_embd));
    c_proj = register_module("c_proj", torch::nn::Linear(n_embd, n_embd));  // unused by forward, as upstream
    bias = register_buffer("bias", torch::tril(torch::ones({max_seqlen, max_seqlen})).view({1, 1, max_seqlen, max_seqlen}));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto qkv = c_attn(x).split(n_embd, 2);
    at::Tensor q = qkv[0].view({B, T, n_head, C / n_head}).transpose(1, 2);  // (B, nh, T, hs)
    at::Tensor k = qkv[1].view({B, T, n_head, C / n_head}).transpose(1, 2);
    at::Tensor v = qkv[2].view({B, T, n_head, C / n_head}).transpose(1, 2);
    at::Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(k.size(-1))));
    at::Tensor mask = bias.slice(2, 0, T).slice(3, 0, T) == 0;
    att = torch::relu(att.masked_fill(mask, -std::numeric_limits<double>::infinity()));  // masked entries become 0
    at::Tensor y = torch::matmul(att, v);                    // (B, nh, T, hs)
    return y.transpose(1, 2).contiguous().view({B, T, C});  // heads side by side
  }
};
KLOOP_REGISTER_REFERENCE(Model)
