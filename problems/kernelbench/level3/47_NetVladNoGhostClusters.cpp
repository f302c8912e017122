// KernelBench level 3, task 47: NetVLAD pooling (soft-assignment with BatchNorm, residual aggregation, intra and global L2 norms).
#include <kloop/reference_api.h>

#include <cmath>

struct Model : torch::nn::Module {
  int64_t cluster_size, feature_size;
  at::Tensor clusters;   // (feature_size, cluster_size + ghost_clusters): assignment weights
  at::Tensor clusters2;  // (1, feature_size, cluster_size): visual words
  torch::nn::BatchNorm1d batch_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init)
      : cluster_size(init.arg_int("cluster_size")), feature_size(init.arg_int("feature_size")) {
    const int64_t clusters_total = cluster_size + init.arg_int("ghost_clusters");
    // Upstream's init_sc * torch.randn(...), drawn in its order (seeded construction).
    const double init_sc = 1.0 / std::sqrt(static_cast<double>(feature_size));
    clusters = register_parameter("clusters", init_sc * torch::randn({feature_size, clusters_total}));
    batch_norm = register_module("batch_norm", torch::nn::BatchNorm1d(clusters_total));
    clusters2 = register_parameter("clusters2", init_sc * torch::randn({1, feature_size, cluster_size}));
  }
  // x: (B, N, D) -> (B, D * K)
  at::Tensor forward(const at::Tensor& x_in) {
    const int64_t max_sample = x_in.size(1);
    at::Tensor x = x_in.view({-1, feature_size});                       // BN x D
    at::Tensor assignment = batch_norm(torch::matmul(x, clusters));    // BN x (K+G), batch statistics
    assignment = torch::softmax(assignment, 1);
    assignment = assignment.slice(1, 0, cluster_size);                  // drop the ghost clusters
    assignment = assignment.view({-1, max_sample, cluster_size});      // B x N x K
    at::Tensor a = torch::sum(assignment, 1, /*keepdim=*/true) * clusters2;  // B x D x K
    assignment = assignment.transpose(1, 2);                            // B x K x N
    x = x.view({-1, max_sample, feature_size});                         // B x N x D
    at::Tensor vlad = torch::matmul(assignment, x).transpose(1, 2) - a; // B x D x K
    namespace F = torch::nn::functional;
    vlad = F::normalize(vlad, F::NormalizeFuncOptions().p(2).dim(1));   // intra-normalisation over D
    vlad = vlad.reshape({-1, cluster_size * feature_size});
    return F::normalize(vlad, F::NormalizeFuncOptions().p(2).dim(1));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
