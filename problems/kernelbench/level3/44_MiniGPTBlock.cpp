// KernelBench level 3, task 44: a minGPT transformer block (pre-LayerNorm causal self-attention and a NewGELU MLP, both residual).
#include <kloop/reference_api.h>

#include <cmath>
#include <limits>

// GELU, tanh approximation (minGPT's NewGELU).
at::Tensor new_gelu(const at::Tensor& x) {
  return 0.5 * x * (1.0 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * torch::pow(x, 3.0))));
}

struct CausalSelfAttentionImpl : torch::nn::Module {
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  at::Tensor bias;  // causal mask, (1, 1, max_seqlen, max_seqlen)
  int64_t n_head, n_embd;
  CausalSelfAttentionImpl(int64_t n_embd_, int64_t n_head_, int64_t max_seqlen) : n_head(n_head_), n_embd(n_embd_) {
    c_attn = register_module("c_attn", torch::nn::Linear(n_embd, 3 * n_embd));
    c_proj = register_module("c_proj", torch::nn::Linear(n_embd, n_embd));
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
    att = torch::softmax(att.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
    at::Tensor y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
    return c_proj(y);
  }
};
TORCH_MODULE(CausalSelfAttention);

// Upstream's nn.ModuleDict(c_fc, c_proj, act, dropout); only the two Linears hold weights.
struct MlpImpl : torch::nn::Module {
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  explicit MlpImpl(int64_t n_embd) {
    c_fc = register_module("c_fc", torch::nn::Linear(n_embd, 4 * n_embd));
    c_proj = register_module("c_proj", torch::nn::Linear(4 * n_embd, n_embd));
  }
  at::Tensor forward(const at::Tensor& x) { return c_proj(new_gelu(c_fc(x))); }
};
TORCH_MODULE(Mlp);

struct Model : torch::nn::Module {
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  Mlp mlp{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t n_embd = init.arg_int("n_embd");
    // attn_pdrop and resid_pdrop are upstream's 0.0: every dropout is identity.
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
    attn = register_module("attn", CausalSelfAttention(n_embd, init.arg_int("n_head"), init.arg_int("max_seqlen")));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
    mlp = register_module("mlp", Mlp(n_embd));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = x + attn(ln_1(x));
    return h + mlp(ln_2(h));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
