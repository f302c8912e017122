// KernelBench level 3, task 32: a conv-patchified ViT with one projected token, a class token and 6 encoder layers.
#include <kloop/reference_api.h>

namespace nn = torch::nn;

struct Model : nn::Module {
  nn::Conv2d conv1{nullptr};
  nn::Linear linear_proj{nullptr}, fc_out{nullptr};
  nn::ModuleList transformer_layers;
  at::Tensor cls_token;

  explicit Model(const kloop::ModuleInit& init) {
    const int64_t embed_dim = init.arg_int("embed_dim"), patch_size = init.arg_int("patch_size");
    const int64_t image_size = init.arg_int("image_size");
    const int64_t dim_feedforward = static_cast<int64_t>(embed_dim * init.arg_float("mlp_ratio"));
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(init.arg_int("in_channels"), embed_dim, patch_size).stride(patch_size)));
    const int64_t num_patches = (image_size / patch_size) * (image_size / patch_size);
    linear_proj = register_module("linear_proj", nn::Linear(embed_dim * num_patches, embed_dim));
    for (int64_t i = 0; i < init.arg_int("num_layers"); ++i) {
      transformer_layers->push_back(nn::TransformerEncoderLayer(
          nn::TransformerEncoderLayerOptions(embed_dim, init.arg_int("num_heads")).dim_feedforward(dim_feedforward).dropout(0.0)));
    }
    register_module("transformer_layers", transformer_layers);
    cls_token = register_parameter("cls_token", torch::zeros({1, 1, embed_dim}));
    fc_out = register_module("fc_out", nn::Linear(embed_dim, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& img) {
    const int64_t B = img.size(0);
    at::Tensor x = linear_proj(conv1(img).flatten(1));                          // (B, embed_dim)
    x = torch::cat({cls_token.expand({B, -1, -1}), x.unsqueeze(1)}, 1);        // (B, 2, embed_dim)
    // Upstream's layers are batch_first; LibTorch's take (seq, batch, dim).
    x = x.transpose(0, 1);
    for (const auto& layer : *transformer_layers) x = layer->as<nn::TransformerEncoderLayerImpl>()->forward(x);
    x = x.transpose(0, 1);
    return fc_out(x.select(1, 0));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
