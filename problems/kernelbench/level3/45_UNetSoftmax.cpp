// KernelBench level 3, task 45: a 4-level U-Net whose double convs use BatchNorm then Softmax over the width axis.
#include <kloop/reference_api.h>

namespace nn = torch::nn;

// (Conv3x3 + BatchNorm + Softmax over the last dim) twice.
struct DoubleConvImpl : nn::Module {
  nn::Sequential double_conv{nullptr};
  DoubleConvImpl(int64_t in_channels, int64_t out_channels) {
    double_conv = register_module(
        "double_conv",
        nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 3).padding(1)),
                       nn::BatchNorm2d(out_channels), nn::Softmax(nn::SoftmaxOptions(-1)),
                       nn::Conv2d(nn::Conv2dOptions(out_channels, out_channels, 3).padding(1)),
                       nn::BatchNorm2d(out_channels), nn::Softmax(nn::SoftmaxOptions(-1))));
  }
  at::Tensor forward(const at::Tensor& x) { return double_conv->forward(x); }
};
TORCH_MODULE(DoubleConv);

struct Model : nn::Module {
  DoubleConv encoder1{nullptr}, encoder2{nullptr}, encoder3{nullptr}, encoder4{nullptr}, bottleneck{nullptr};
  DoubleConv decoder4{nullptr}, decoder3{nullptr}, decoder2{nullptr}, decoder1{nullptr};
  nn::MaxPool2d pool1{nullptr}, pool2{nullptr}, pool3{nullptr}, pool4{nullptr};
  nn::ConvTranspose2d upconv4{nullptr}, upconv3{nullptr}, upconv2{nullptr}, upconv1{nullptr};
  nn::Conv2d final_conv{nullptr};

  static nn::ConvTranspose2d up(int64_t in, int64_t out) {
    return nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in, out, 2).stride(2));
  }
  static nn::MaxPool2d pool() { return nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)); }

  explicit Model(const kloop::ModuleInit& init) {
    const int64_t in_channels = init.arg_int("in_channels"), out_channels = init.arg_int("out_channels");
    const int64_t f = init.arg_int("features");
    encoder1 = register_module("encoder1", DoubleConv(in_channels, f));
    pool1 = register_module("pool1", pool());
    encoder2 = register_module("encoder2", DoubleConv(f, f * 2));
    pool2 = register_module("pool2", pool());
    encoder3 = register_module("encoder3", DoubleConv(f * 2, f * 4));
    pool3 = register_module("pool3", pool());
    encoder4 = register_module("encoder4", DoubleConv(f * 4, f * 8));
    pool4 = register_module("pool4", pool());
    bottleneck = register_module("bottleneck", DoubleConv(f * 8, f * 16));
    upconv4 = register_module("upconv4", up(f * 16, f * 8));
    decoder4 = register_module("decoder4", DoubleConv(f * 16, f * 8));
    upconv3 = register_module("upconv3", up(f * 8, f * 4));
    decoder3 = register_module("decoder3", DoubleConv(f * 8, f * 4));
    upconv2 = register_module("upconv2", up(f * 4, f * 2));
    decoder2 = register_module("decoder2", DoubleConv(f * 4, f * 2));
    upconv1 = register_module("upconv1", up(f * 2, f));
    decoder1 = register_module("decoder1", DoubleConv(f * 2, f));
    final_conv = register_module("final_conv", nn::Conv2d(nn::Conv2dOptions(f, out_channels, 1)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor enc1 = encoder1(x);
    at::Tensor enc2 = encoder2(pool1(enc1));
    at::Tensor enc3 = encoder3(pool2(enc2));
    at::Tensor enc4 = encoder4(pool3(enc3));
    at::Tensor mid = bottleneck(pool4(enc4));
    at::Tensor dec4 = decoder4(torch::cat({upconv4(mid), enc4}, 1));
    at::Tensor dec3 = decoder3(torch::cat({upconv3(dec4), enc3}, 1));
    at::Tensor dec2 = decoder2(torch::cat({upconv2(dec3), enc2}, 1));
    at::Tensor dec1 = decoder1(torch::cat({upconv1(dec2), enc1}, 1));
    return final_conv(dec1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
