// KernelBench level 3, task 30: a Swin Transformer V2 classifier (cosine window attention, continuous position bias).
#include <kloop/reference_api.h>

#include <cmath>
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

struct WindowAttentionImpl : nn::Module {
  int64_t Wh, Ww, num_heads;
  at::Tensor logit_scale, q_bias, v_bias, relative_coords_table, relative_position_index;
  nn::Sequential cpb_mlp{nullptr};
  nn::Linear qkv{nullptr}, proj{nullptr};

  WindowAttentionImpl(int64_t dim, int64_t window, int64_t num_heads_, bool qkv_bias, int64_t pretrained_window)
      : Wh(window), Ww(window), num_heads(num_heads_) {
    logit_scale = register_parameter("logit_scale", torch::log(10 * torch::ones({num_heads, 1, 1})));
    // MLP giving the continuous relative position bias
    cpb_mlp = register_module("cpb_mlp", nn::Sequential(nn::Linear(2, 512), nn::ReLU(),
                                                        nn::Linear(nn::LinearOptions(512, num_heads).bias(false))));
    // relative coordinates table, (1, 2Wh-1, 2Ww-1, 2), normalised to [-8, 8] and log-spaced
    at::Tensor h = torch::arange(-(Wh - 1), Wh, torch::kFloat32);
    at::Tensor w = torch::arange(-(Ww - 1), Ww, torch::kFloat32);
    at::Tensor table = torch::stack(torch::meshgrid({h, w}, "ij")).permute({1, 2, 0}).contiguous().unsqueeze(0);
    const double norm_h = pretrained_window > 0 ? pretrained_window - 1 : Wh - 1;
    const double norm_w = pretrained_window > 0 ? pretrained_window - 1 : Ww - 1;
    table.select(3, 0).div_(norm_h);
    table.select(3, 1).div_(norm_w);
    table *= 8;
    table = torch::sign(table) * torch::log2(torch::abs(table) + 1.0) / std::log2(8.0);
    relative_coords_table = register_buffer("relative_coords_table", table);
    // pair-wise relative position index of the tokens in a window, (Wh*Ww, Wh*Ww)
    at::Tensor coords = torch::stack(torch::meshgrid({torch::arange(Wh), torch::arange(Ww)}, "ij"));
    at::Tensor flat = torch::flatten(coords, 1);
    at::Tensor rel = (flat.unsqueeze(2) - flat.unsqueeze(1)).permute({1, 2, 0}).contiguous();
    rel.select(2, 0).add_(Wh - 1);
    rel.select(2, 1).add_(Ww - 1);
    rel.select(2, 0).mul_(2 * Ww - 1);
    relative_position_index = register_buffer("relative_position_index", rel.sum(-1));

    qkv = register_module("qkv", nn::Linear(nn::LinearOptions(dim, dim * 3).bias(false)));
    if (qkv_bias) {
      q_bias = register_parameter("q_bias", torch::zeros({dim}));
      v_bias = register_parameter("v_bias", torch::zeros({dim}));
    }
    proj = register_module("proj", nn::Linear(dim, dim));
  }

  // x: (num_windows*B, N, C); mask: (num_windows, N, N) of 0 / -100, or undefined
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const int64_t B_ = x.size(0), N = x.size(1), C = x.size(2);
    at::Tensor bias;
    if (q_bias.defined()) bias = torch::cat({q_bias, torch::zeros_like(v_bias), v_bias});
    at::Tensor qkv_out = torch::linear(x, qkv->weight, bias).reshape({B_, N, 3, num_heads, -1}).permute({2, 0, 3, 1, 4});
    at::Tensor q = qkv_out[0], k = qkv_out[1], v = qkv_out[2];

    // cosine attention with a learned, clamped temperature
    namespace F = torch::nn::functional;
    at::Tensor attn = torch::matmul(F::normalize(q, F::NormalizeFuncOptions().dim(-1)),
                                    F::normalize(k, F::NormalizeFuncOptions().dim(-1)).transpose(-2, -1));
    attn = attn * torch::clamp(logit_scale, c10::nullopt, std::log(1.0 / 0.01)).exp();

    at::Tensor bias_table = cpb_mlp->forward(relative_coords_table).view({-1, num_heads});
    at::Tensor rpb = bias_table.index_select(0, relative_position_index.view(-1)).view({Wh * Ww, Wh * Ww, -1});
    rpb = 16 * torch::sigmoid(rpb.permute({2, 0, 1}).contiguous());
    attn = attn + rpb.unsqueeze(0);

    if (mask.defined()) {
      const int64_t nW = mask.size(0);
      attn = attn.view({B_ / nW, nW, num_heads, N, N}) + mask.unsqueeze(1).unsqueeze(0);
      attn = attn.view({-1, num_heads, N, N});
    }
    attn = torch::softmax(attn, -1);
    return proj(torch::matmul(attn, v).transpose(1, 2).reshape({B_, N, C}));
  }
};
TORCH_MODULE(WindowAttention);

struct SwinTransformerBlockImpl : nn::Module {
  int64_t H, W, window_size, shift_size;
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  WindowAttention attn{nullptr};
  Mlp mlp{nullptr};
  at::Tensor attn_mask;  // registered only for shifted blocks, as upstream's buffer of None is not in its state_dict

  SwinTransformerBlockImpl(int64_t dim, int64_t H_, int64_t W_, int64_t num_heads, int64_t window_size_,
                           int64_t shift_size_, double mlp_ratio, bool qkv_bias, int64_t pretrained_window_size)
      : H(H_), W(W_), window_size(window_size_), shift_size(shift_size_) {
    if (std::min(H, W) <= window_size) {  // window covers the whole map: no partition, no shift
      shift_size = 0;
      window_size = std::min(H, W);
    }
    TORCH_CHECK(0 <= shift_size && shift_size < window_size, "shift_size must in 0-window_size");
    norm1 = register_module("norm1", layer_norm(dim));
    attn = register_module("attn", WindowAttention(dim, window_size, num_heads, qkv_bias, pretrained_window_size));
    norm2 = register_module("norm2", layer_norm(dim));
    mlp = register_module("mlp", Mlp(dim, static_cast<int64_t>(dim * mlp_ratio)));
    if (shift_size > 0) {
      // label the 3x3 regions the cyclic shift brings together; tokens of different regions may not attend
      at::Tensor img_mask = torch::zeros({1, H, W, 1});
      const int64_t hb[4] = {0, H - window_size, H - shift_size, H};
      const int64_t wb[4] = {0, W - window_size, W - shift_size, W};
      int64_t cnt = 0;
      for (int a = 0; a < 3; ++a) {
        for (int b = 0; b < 3; ++b) {
          img_mask.slice(1, hb[a], hb[a + 1]).slice(2, wb[b], wb[b + 1]).fill_(static_cast<double>(cnt++));
        }
      }
      at::Tensor mask_windows = window_partition(img_mask, window_size).view({-1, window_size * window_size});
      at::Tensor m = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2);
      m = m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0);
      attn_mask = register_buffer("attn_mask", m);
    }
  }
  at::Tensor forward(const at::Tensor& input) {
    const int64_t B = input.size(0), C = input.size(2), ws = window_size;
    TORCH_CHECK(input.size(1) == H * W, "input feature has wrong size");
    at::Tensor x = input.view({B, H, W, C});
    if (shift_size > 0) x = torch::roll(x, {-shift_size, -shift_size}, {1, 2});
    at::Tensor windows = window_partition(x, ws).view({-1, ws * ws, C});
    at::Tensor attn_windows = attn(windows, attn_mask).view({-1, ws, ws, C});
    x = window_reverse(attn_windows, ws, H, W);
    if (shift_size > 0) x = torch::roll(x, {shift_size, shift_size}, {1, 2});
    x = input + norm1(x.view({B, H * W, C}));
    return x + norm2(mlp(x));
  }
};
TORCH_MODULE(SwinTransformerBlock);

// 2x2 neighbourhoods concatenated (4C), Linear to 2C, LayerNorm.
struct PatchMergingImpl : nn::Module {
  int64_t H, W;
  nn::Linear reduction{nullptr};
  nn::LayerNorm norm{nullptr};
  PatchMergingImpl(int64_t H_, int64_t W_, int64_t dim) : H(H_), W(W_) {
    reduction = register_module("reduction", nn::Linear(nn::LinearOptions(4 * dim, 2 * dim).bias(false)));
    norm = register_module("norm", layer_norm(2 * dim));
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
    return norm(reduction(x));
  }
};
TORCH_MODULE(PatchMerging);

struct BasicLayerImpl : nn::Module {
  nn::ModuleList blocks;
  PatchMerging downsample{nullptr};
  BasicLayerImpl(int64_t dim, int64_t H, int64_t W, int64_t depth, int64_t num_heads, int64_t window_size,
                 double mlp_ratio, bool qkv_bias, bool has_downsample, int64_t pretrained_window_size) {
    for (int64_t i = 0; i < depth; ++i) {
      blocks->push_back(SwinTransformerBlock(dim, H, W, num_heads, window_size, i % 2 == 0 ? 0 : window_size / 2,
                                             mlp_ratio, qkv_bias, pretrained_window_size));
    }
    register_module("blocks", blocks);
    if (has_downsample) downsample = register_module("downsample", PatchMerging(H, W, dim));
  }
  at::Tensor forward(at::Tensor x) {
    for (const auto& blk : *blocks) x = blk->as<SwinTransformerBlockImpl>()->forward(x);
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
    const std::vector<int64_t> pretrained = init.arg_ints("pretrained_window_sizes");
    const double mlp_ratio = init.arg_float("mlp_ratio");
    const bool qkv_bias = init.arg_bool("qkv_bias");
    const int64_t num_layers = static_cast<int64_t>(depths.size());
    const int64_t num_features = embed_dim << (num_layers - 1);
    // drop_rate, attn_drop_rate and drop_path_rate: dropout is identity and upstream's blocks use nn.Identity for drop_path.
    patch_embed = register_module("patch_embed", PatchEmbed(img_size, patch_size, init.arg_int("in_chans"), embed_dim,
                                                            init.arg_bool("patch_norm")));
    const int64_t res = img_size / patch_size;
    for (int64_t i = 0; i < num_layers; ++i) {
      layers->push_back(BasicLayer(embed_dim << i, res >> i, res >> i, depths[i], num_heads[i], window_size, mlp_ratio,
                                   qkv_bias, i < num_layers - 1, pretrained[i]));
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
