// KernelBench level 3, task 49: the Mamba-2 SSD chunked scan (naive segment sums), returning the final inter-chunk state.
#include <kloop/reference_api.h>

#include <limits>

struct Model : torch::nn::Module {
  int64_t block_len;
  at::Tensor A, B, C;  // (batch, seq, heads), (batch, seq, heads, d_state) twice
  explicit Model(const kloop::ModuleInit& init) : block_len(init.arg_int("block_len")) {
    const int64_t batch_size = init.arg_int("batch_size"), seq_length = init.arg_int("seq_length");
    const int64_t n_heads = init.arg_int("n_heads"), d_state = init.arg_int("d_state");
    TORCH_CHECK(seq_length % block_len == 0, "Sequence length must be divisible by block length");
    A = register_parameter("A", torch::randn({batch_size, seq_length, n_heads}));
    B = register_parameter("B", torch::randn({batch_size, seq_length, n_heads, d_state}));
    C = register_parameter("C", torch::randn({batch_size, seq_length, n_heads, d_state}));
  }

  // Naive segment sum over the last dim: out[..., i, j] = sum of x[..., j+1..i] for j <= i, -inf above the diagonal.
  static at::Tensor segsum(const at::Tensor& x) {
    const int64_t T = x.size(-1);
    at::Tensor x_cumsum = torch::cumsum(x, -1);
    at::Tensor x_segsum = x_cumsum.unsqueeze(-1) - x_cumsum.unsqueeze(-2);
    at::Tensor mask = torch::tril(torch::ones({T, T}, x.options().dtype(torch::kBool)), 0);
    return x_segsum.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  }

  // "b (c l) ... -> b c l ...": split the sequence dim into chunks of block_len.
  at::Tensor chunk(const at::Tensor& t) const {
    std::vector<int64_t> shape{t.size(0), t.size(1) / block_len, block_len};
    for (int64_t d = 2; d < t.dim(); ++d) shape.push_back(t.size(d));
    return t.reshape(shape);
  }

  // X: (batch, seq, heads, d_head)
  at::Tensor forward(const at::Tensor& X) {
    at::Tensor X_blocks = chunk(X), B_blocks = chunk(B), C_blocks = chunk(C);
    at::Tensor A_blocks = chunk(A).permute({0, 3, 1, 2});  // b h c l
    at::Tensor A_cumsum = torch::cumsum(A_blocks, -1);

    // 1. diagonal block outputs (computed and left unused, as upstream)
    at::Tensor L = torch::exp(segsum(A_blocks));
    at::Tensor Y_diag = torch::einsum("bclhn,bcshn,bhcls,bcshp->bclhp", {C_blocks, B_blocks, L, X_blocks});

    // 2. intra-chunk states
    at::Tensor decay_states = torch::exp(A_cumsum.slice(3, -1) - A_cumsum);
    at::Tensor states = torch::einsum("bclhn,bhcl,bclhp->bchpn", {B_blocks, decay_states, X_blocks});

    // 3. inter-chunk recurrence, from zero initial states
    at::Tensor initial_states = torch::zeros_like(states.slice(1, 0, 1));
    states = torch::cat({initial_states, states}, 1);
    at::Tensor last = A_cumsum.select(3, -1);  // b h c
    at::Tensor decay_chunk = torch::exp(segsum(torch::constant_pad_nd(last, {1, 0})));
    at::Tensor new_states = torch::einsum("bhzc,bchpn->bzhpn", {decay_chunk, states});
    return new_states.select(1, -1);  // (batch, heads, d_head, d_state)
  }
};
KLOOP_REGISTER_REFERENCE(Model)
