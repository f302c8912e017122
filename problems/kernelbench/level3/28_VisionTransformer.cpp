// KernelBench level 3, task 28: a ViT (patch embedding, class token, position embedding, post-norm TransformerEncoder, MLP head).
#include <ATen/CPUGeneratorImpl.h>
#include <kloop/reference_api.h>

#include <mutex>

namespace nn = torch::nn;

struct Model : nn::Module {
  int64_t patch_size;
  at::Tensor pos_embedding, cls_token;
  nn::Linear patch_to_embedding{nullptr};
  nn::TransformerEncoder transformer{nullptr};
  nn::Sequential mlp_head{nullptr};

  explicit Model(const kloop::ModuleInit& init) : patch_size(init.arg_int("patch_size")) {
    const int64_t image_size = init.arg_int("image_size"), channels = init.arg_int("channels");
    const int64_t dim = init.arg_int("dim"), mlp_dim = init.arg_int("mlp_dim");
    TORCH_CHECK(image_size % patch_size == 0, "Image dimensions must be divisible by the patch size.");
    const int64_t num_patches = (image_size / patch_size) * (image_size / patch_size);
    const int64_t patch_dim = channels * patch_size * patch_size;
    pos_embedding = register_parameter("pos_embedding", torch::randn({1, num_patches + 1, dim}));
    patch_to_embedding = register_module("patch_to_embedding", nn::Linear(patch_dim, dim));
    cls_token = register_parameter("cls_token", torch::randn({1, 1, dim}));
    // dropout and emb_dropout are upstream's 0.0: every dropout is identity.
    nn::TransformerEncoderLayer layer(
        nn::TransformerEncoderLayerOptions(dim, init.arg_int("heads")).dim_feedforward(mlp_dim).dropout(0.0));
    // LibTorch's TransformerEncoder builds each copy of the layer anew (drawing from the generator) before it
    // copies the layer's values in; PyTorch's deep-copies the layer without a draw. The generator is put back,
    // so the head draws what upstream's does (KernelBench's seeded construction).
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      state = generator.get_state();
    }
    transformer = register_module("transformer", nn::TransformerEncoder(nn::TransformerEncoderOptions(layer, init.arg_int("depth"))));
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
    mlp_head = register_module("mlp_head", nn::Sequential(nn::Linear(dim, mlp_dim), nn::GELU(), nn::Identity(),
                                                          nn::Linear(mlp_dim, init.arg_int("num_classes"))));
  }

  at::Tensor forward(const at::Tensor& img) {
    const int64_t p = patch_size, B = img.size(0);
    // Upstream's patch flattening, reshape order included.
    at::Tensor x = img.unfold(2, p, p).unfold(3, p, p).reshape({B, -1, p * p * img.size(1)});
    x = patch_to_embedding(x);
    x = torch::cat({cls_token.expand({B, -1, -1}), x}, 1);
    x = x + pos_embedding;
    // (B, num_patches + 1, dim) goes in as nn.TransformerEncoder's default (seq, batch, dim) layout, as upstream.
    x = transformer(x);
    return mlp_head->forward(x.select(1, 0));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
