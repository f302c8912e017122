// KernelBench level 3, task 29: a Swin-MLP classifier (per-head window token mixing by grouped 1x1 Conv1d, padded shifts).
#include <kloop/reference_api.h>

#include <algorithm>

namespace nn = torch::nn;

namespace {
// (B, H, W, C) -> (num_windows * B, window_size, window_size, C)
at::Tensor window_partition(const at::Tensor& x, int64_t ws) {
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  return x.view({B, H / ws, ws, W / ws, ws, C}).permute({0, 1, 3, 2, 4, 5}).contiguous().view({-1, ws, ws, C});
}
// (num_windows * B, window_size, window_size, C) -> (B, H, W, C)
at::Tensor window_reverse(const at::Tensor& windows, int64_t ws, int64_t H, int64_t W) {
  const int64_t B = windows.size(0) / ((H / ws) * (W / ws));
  return windows.view({B, H / ws, W / ws, ws, ws, -1}).permute({0, 1, 3, 2, 4, 5}).contiguous().view({B, H, W, -1});
}
nn::LayerNorm layer_norm(int64_t dim) { return nn::LayerNorm(nn::LayerNormOptions({dim})); }
}  // namespace

struct MlpImpl : nn::Module {
  nn::Linear fc1{nullptr}, fc2{nullptr};
  MlpImpl(int64_t in_features, int64_t hidden_features) {
    fc1 = register_module("fc1", nn::Linear(in_features, hidden_features));
    fc2 = register_module("fc2", nn::Linear(hidden_features, in_features));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2(torch::gelu(fc1(x))); }
};
TORCH_MODULE(Mlp);

struct SwinMLPBlockImpl : nn::Module {
  int64_t H, W, num_heads, window_size, shift_size;
  int64_t pad_l, pad_r, pad_t, pad_b;
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  nn::Conv1d spatial_mlp{nullptr};
  Mlp mlp{nullptr};
  SwinMLPBlockImpl(int64_t dim, int64_t H_, int64_t W_, int64_t num_heads_, int64_t window_size_, int64_t shift_size_,
                   double mlp_ratio)
      : H(H_), W(W_), num_heads(num_heads_), window_size(window_size_), shift_size(shift_size_) {
    if (std::min(H, W) <= window_size) {  // window covers the whole map: no partition, no shift
      shift_size = 0;
      window_size = std::min(H, W);
    }
    TORCH_CHECK(0 <= shift_size && shift_size < window_size, "shift_size must in 0-window_size");
    pad_l = pad_t = window_size - shift_size;
    pad_r = pad_b = shift_size;
    norm1 = register_module("norm1", layer_norm(dim));
    const int64_t tokens = num_heads * window_size * window_size;
    spatial_mlp = register_module("spatial_mlp", nn::Conv1d(nn::Conv1dOptions(tokens, tokens, 1).groups(num_heads)));
    norm2 = register_module("norm2", layer_norm(dim));
    mlp = register_module("mlp", Mlp(dim, static_cast<int64_t>(dim * mlp_ratio)));
  }
  at::Tensor forward(const at::Tensor& input) {
    const int64_t B = input.size(0), C = input.size(2), ws = window_size, nH = num_heads;
    TORCH_CHECK(input.size(1) == H * W, "input feature has wrong size");
    at::Tensor x = norm1(input).view({B, H, W, C});
    at::Tensor shifted = shift_size > 0 ? torch::constant_pad_nd(x, {0, 0, pad_l, pad_r, pad_t, pad_b}, 0) : x;
    const int64_t Hp = shifted.size(1), Wp = shifted.size(2);
    at::Tensor windows = window_partition(shifted, ws).view({-1, ws * ws, C});
    // per head, mix the window's tokens: (nW*B, nH * ws*ws, C/nH) through the grouped 1x1 conv
    at::Tensor heads = windows.view({-1, ws * ws, nH, C / nH}).transpose(1, 2).reshape({-1, nH * ws * ws, C / nH});
    at::Tensor mixed = spatial_mlp(heads).view({-1, nH, ws * ws, C / nH}).transpose(1, 2).reshape({-1, ws * ws, C});
    shifted = window_reverse(mixed.reshape({-1, ws, ws, C}), ws, Hp, Wp);
    if (shift_size > 0) x = shifted.slice(1, pad_t, Hp - pad_b).slice(2, pad_l, Wp - pad_r).contiguous();
    else x = shifted;
    x = input + x.view({B, H * W, C});
    return x + mlp(norm2(x));
  }
};
TORCH_MODULE(SwinMLPBlock);

// 2x2 neighbourhoods concatenated (4C), LayerNorm, Linear to 2C.
struct PatchMergingImpl : nn::Module {
  int64_t H, W;
  nn::Linear reduction{nullptr};
  nn::LayerNorm norm{nullptr};
  PatchMergingImpl(int64_t H_, int64_t W_, int64_t dim) : H(H_), W(W_) {
    reduction = register_module("reduction", nn::Linear(nn::LinearOptions(4 * dim, 2 * dim).bias(false)));
    norm = register_module("norm", layer_norm(4 * dim));
  }
  at::Tensor forward(const at::Tensor& input) {
    const int64_t B = input.size(0), C = input.size(2);
    TORCH_CHECK(input.size(1) == H * W, "input feature has wrong size");
    TORCH_CHECK(H % 2 == 0 && W % 2 == 0, "x size (", H, "*", W, ") are not even.");
    at::Tensor x = input.view({B, H, W, C});
    at::Tensor x0 = x.slice(1, 0, H, 2).slice(2, 0, W, 2);
    at::Tensor x1 = x.slice(1, 1, H, 2).slice(2, 0, W, 2);
    at::Tensor x2 = x.slice(1, 0, H, 2).slice(2, 1, W, 2);
    at::Tensor x3 = x.slice(1, 1, H, 2).slice(2, 1, W, 2);
    x = torch::cat({x0, x1, x2, x3}, -1).view({B, -1, 4 * C});
    return reduction(norm(x));
  }
};
TORCH_MODULE(PatchMerging);

struct BasicLayerImpl : nn::Module {
  nn::ModuleList blocks;
  PatchMerging downsample{nullptr};
  BasicLayerImpl(int64_t dim, int64_t H, int64_t W, int64_t depth, int64_t num_heads, int64_t window_size,
                 double mlp_ratio, bool has_downsample) {
    for (int64_t i = 0; i < depth; ++i) {
      blocks->push_back(SwinMLPBlock(dim, H, W, num_heads, window_size, i % 2 == 0 ? 0 : window_size / 2, mlp_ratio));
    }
    register_module("blocks", blocks);
    if (has_downsample) downsample = register_module("downsample", PatchMerging(H, W, dim));
  }
  at::Tensor forward(at::Tensor x) {
    for (const auto& blk : *blocks) x = blk->as<SwinMLPBlockImpl>()->forward(x);
    return downsample ? downsample(x) : x;
  }
};
TORCH_MODULE(BasicLayer);

struct PatchEmbedImpl : nn::Module {
  nn::Conv2d proj{nullptr};
  nn::LayerNorm norm{nullptr};
  int64_t img_size;
  PatchEmbedImpl(int64_t img_size_, int64_t patch_size, int64_t in_chans, int64_t embed_dim, bool patch_norm)
      : img_size(img_size_) {
    proj = register_module("proj", nn::Conv2d(nn::Conv2dOptions(in_chans, embed_dim, patch_size).stride(patch_size)));
    if (patch_norm) norm = register_module("norm", layer_norm(embed_dim));
  }
  at::Tensor forward(const at::Tensor& x) {
    TORCH_CHECK(x.size(2) == img_size && x.size(3) == img_size, "Input image size doesn't match model.");
    at::Tensor y = proj(x).flatten(2).transpose(1, 2);  // B Ph*Pw C
    return norm ? norm(y) : y;
  }
};
TORCH_MODULE(PatchEmbed);

struct Model : nn::Module {
  PatchEmbed patch_embed{nullptr};
  nn::ModuleList layers;
  nn::LayerNorm norm{nullptr};
  nn::Linear head{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    const int64_t img_size = init.arg_int("img_size"), patch_size = init.arg_int("patch_size");
    const int64_t embed_dim = init.arg_int("embed_dim"), window_size = init.arg_int("window_size");
    const std::vector<int64_t> depths = init.arg_ints("depths"), num_heads = init.arg_ints("num_heads");
    const double mlp_ratio = init.arg_float("mlp_ratio");
    const int64_t num_layers = static_cast<int64_t>(depths.size());
    const int64_t num_features = embed_dim << (num_layers - 1);
    // drop_rate and drop_path_rate: dropout is identity and upstream's blocks use nn.Identity for drop_path.
    patch_embed = register_module("patch_embed", PatchEmbed(img_size, patch_size, init.arg_int("in_chans"), embed_dim,
                                                            init.arg_bool("patch_norm")));
    const int64_t res = img_size / patch_size;
    for (int64_t i = 0; i < num_layers; ++i) {
      layers->push_back(BasicLayer(embed_dim << i, res >> i, res >> i, depths[i], num_heads[i], window_size, mlp_ratio,
                                   i < num_layers - 1));
    }
    register_module("layers", layers);
    norm = register_module("norm", layer_norm(num_features));
    head = register_module("head", nn::Linear(num_features, init.arg_int("num_classes")));
  }
  at::Tensor forward(const at::Tensor& img) {
    at::Tensor x = patch_embed(img);
    for (const auto& layer : *layers) x = layer->as<BasicLayerImpl>()->forward(x);
    x = norm(x);                                                          // B L C
    x = torch::adaptive_avg_pool1d(x.transpose(1, 2), {1}).flatten(1);   // B C
    return head(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
