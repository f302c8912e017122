#include "profiler/records.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kloop::profiler {
namespace {

KernelRecord sample_kernel() {
  KernelRecord k;
  k.name = "copy_kernel(float const*, float*, unsigned long)";
  k.mangled = "_Z11copy_kernelPKfPfm";
  k.grid = {1024, 2, 1};
  k.block = {256, 1, 1};
  k.registers_per_thread = 40;
  k.static_shared_bytes = 4096;
  k.dynamic_shared_bytes = 8192;
  k.stream_id = 7;
  k.start_ns = 1'000'000'000'123;
  k.end_ns = 1'000'000'250'623;
  k.correlation_id = 42;
  return k;
}

TEST(RecordsTest, KernelRecordFigures) {
  KernelRecord k = sample_kernel();
  EXPECT_DOUBLE_EQ(k.duration_us(), 250.5);
  EXPECT_EQ(k.threads_per_block(), 256u);
  EXPECT_EQ(k.blocks(), 2048u);
  k.end_ns = k.start_ns;  // no timestamps: zero, never negative
  EXPECT_EQ(k.duration_us(), 0.0);
}

TEST(RecordsTest, ActivityTraceRoundTrip) {
  ActivityTrace t;
  t.kernels.push_back(sample_kernel());
  t.memory.push_back({"memcpy HtoD", 1 << 20, 3, 10, 2010});
  t.memory.push_back({"memset", 4096, 7, 3000, 3500});
  t.dropped_records = 2;
  t.launches.push_back({42, "_Z4reluPKfPfl", "/work/candidate.so", false});
  t.launches.push_back({43, "", kSelfObject, true});
  const ActivityTrace back = activity_trace_from_json(nlohmann::json::parse(to_json(t).dump()));
  ASSERT_EQ(back.launches.size(), 2u);
  EXPECT_EQ(back.launches[0].correlation_id, 42u);
  EXPECT_EQ(back.launches[0].mangled, "_Z4reluPKfPfl");
  EXPECT_EQ(back.launches[0].object, "/work/candidate.so");
  EXPECT_FALSE(back.launches[0].graph);
  EXPECT_TRUE(back.launches[1].graph);
  ASSERT_EQ(back.kernels.size(), 1u);
  const KernelRecord& k = back.kernels[0];
  const KernelRecord expected = sample_kernel();
  EXPECT_EQ(k.name, expected.name);
  EXPECT_EQ(k.mangled, expected.mangled);
  EXPECT_EQ(k.grid, expected.grid);
  EXPECT_EQ(k.block, expected.block);
  EXPECT_EQ(k.registers_per_thread, 40);
  EXPECT_EQ(k.static_shared_bytes, 4096);
  EXPECT_EQ(k.dynamic_shared_bytes, 8192);
  EXPECT_EQ(k.stream_id, 7u);
  EXPECT_EQ(k.start_ns, expected.start_ns);  // 64-bit nanoseconds survive JSON exactly
  EXPECT_EQ(k.end_ns, expected.end_ns);
  EXPECT_EQ(k.correlation_id, 42u);
  ASSERT_EQ(back.memory.size(), 2u);
  EXPECT_EQ(back.memory[0].kind, "memcpy HtoD");
  EXPECT_EQ(back.memory[0].bytes, 1u << 20);
  EXPECT_EQ(back.memory[0].stream_id, 3u);
  EXPECT_DOUBLE_EQ(back.memory[0].duration_us(), 2.0);
  EXPECT_EQ(back.memory[1].kind, "memset");
  EXPECT_EQ(back.dropped_records, 2u);
  EXPECT_TRUE(back.unavailable.empty());

  ActivityTrace missing;
  missing.unavailable = "no usable CUDA GPU";
  EXPECT_EQ(activity_trace_from_json(to_json(missing)).unavailable, "no usable CUDA GPU");
}

TEST(RecordsTest, MetricsReportRoundTripKeepsMissingMetricsMissing) {
  MetricsReport r;
  KernelMetrics m;
  m.name = "copy_kernel";
  m.launch_index = 3;
  m.dram_throughput_pct = 91.5;
  m.dram_bytes_read = 1073741824;
  m.dram_bytes_written = 1073741824;
  m.sm_throughput_pct = 30.25;
  m.achieved_occupancy_pct = 88;
  // l1 and l2 hit rates stay unavailable
  r.kernels.push_back(m);
  r.notes.push_back("l1tex__t_sector_hit_rate.pct is not available");
  r.passes = 8;
  r.seconds = 1.5;
  const nlohmann::json j = nlohmann::json::parse(to_json(r).dump());
  EXPECT_TRUE(j["kernels"][0]["l1_hit_rate_pct"].is_null());  // NaN travels as null
  const MetricsReport back = metrics_report_from_json(j);
  ASSERT_EQ(back.kernels.size(), 1u);
  const KernelMetrics& k = back.kernels[0];
  EXPECT_EQ(k.name, "copy_kernel");
  EXPECT_EQ(k.launch_index, 3);
  EXPECT_DOUBLE_EQ(k.dram_throughput_pct, 91.5);
  EXPECT_DOUBLE_EQ(k.dram_bytes_read, 1073741824);
  EXPECT_DOUBLE_EQ(k.dram_bytes_written, 1073741824);
  EXPECT_DOUBLE_EQ(k.sm_throughput_pct, 30.25);
  EXPECT_DOUBLE_EQ(k.achieved_occupancy_pct, 88);
  EXPECT_TRUE(std::isnan(k.l1_hit_rate_pct));
  EXPECT_TRUE(std::isnan(k.l2_hit_rate_pct));
  EXPECT_EQ(back.notes, r.notes);
  EXPECT_EQ(back.passes, 8);
  EXPECT_DOUBLE_EQ(back.seconds, 1.5);
}

TEST(RecordsTest, MissingFieldsKeepDefaults) {
  const KernelMetrics m = kernel_metrics_from_json(nlohmann::json::object());
  EXPECT_TRUE(std::isnan(m.dram_throughput_pct));
  EXPECT_TRUE(std::isnan(m.sm_throughput_pct));
  const MetricsReport r = metrics_report_from_json(nlohmann::json::object());
  EXPECT_TRUE(r.kernels.empty());
  EXPECT_EQ(r.passes, 0);
  const DeviceRates d = device_rates_from_json(nlohmann::json{{"sm_count", 132}});
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.dram_bytes_per_s, 0);
  EXPECT_EQ(kernel_record_from_json(nlohmann::json{{"name", "k"}}).grid, (std::array<uint32_t, 3>{0, 0, 0}));
}

TEST(RecordsTest, DeviceRatesRoundTrip) {
  DeviceRates d{"NVIDIA H200", 4.3e12, 67e12, 495e12, 790e12, 132, 64};
  const DeviceRates back = device_rates_from_json(nlohmann::json::parse(to_json(d).dump()));
  EXPECT_EQ(back.gpu_name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(back.dram_bytes_per_s, 4.3e12);
  EXPECT_DOUBLE_EQ(back.fp32_flops_per_s, 67e12);
  EXPECT_DOUBLE_EQ(back.tf32_flops_per_s, 495e12);
  EXPECT_DOUBLE_EQ(back.bf16_flops_per_s, 790e12);
  EXPECT_EQ(back.sm_count, 132);
  EXPECT_EQ(back.max_warps_per_sm, 64);
}

TEST(RecordsTest, Demangle) {
  EXPECT_EQ(demangle("_Z11copy_kernelPKfPfm"), "copy_kernel(float const*, float*, unsigned long)");
  EXPECT_EQ(demangle("copy_kernel"), "copy_kernel");  // extern "C" kernels are not mangled
  EXPECT_EQ(demangle("_Znot a name"), "_Znot a name");
  EXPECT_EQ(demangle(""), "");
}

TEST(RecordsTest, KernelLibraryFromRealNames) {
  struct Case {
    const char* name;
    const char* library;
  };
  const Case cases[] = {
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, "
       "1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
       "aten"},
      {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
       "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
       "aten"},
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, "
       "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 64, 4, cutlass::bfloat16_t> >, false, false, false, false, "
       "false, true, false, false>(pytorch_flash::Flash_fwd_params)",
       "aten"},
      {"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__"
       "5x_cublas",
       "cublas"},
      {"ampere_sgemm_128x64_nn", "cublas"},
      {"nvjet_tst_128x64_64x8_2x1_v_bz_coopA_NNT", "cublas"},
      {"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x3_nn_align4>(cutlass_80_tensorop_s1688gemm_"
       "128x128_16x3_nn_align4::Params)",
       "cublas"},
      {"void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, "
       "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float "
       "const>, cublasGemvTensorStridedBatched<float>, float> >(float, float)",
       "cublas"},
      {"sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32_warpgroupsize1x1x1_g1_"
       "execute_kernel__5x_cudnn",
       "cudnn"},
      {"void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, "
       "(cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, float const*, float*)",
       "cudnn"},
      {"void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, float "
       "const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float "
       "const*, float const*, bool, int, int)",
       "cudnn"},
      {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
       "MyMainloop, MyEpilogue> >(MyParams)",
       "cutlass"},
      {"void cub::CUB_200200_900_NS::DeviceReduceKernel<cub::CUB_200200_900_NS::DeviceReducePolicy<float, int, "
       "cub::CUB_200200_900_NS::Sum>::Policy600, float*, float*, int, cub::CUB_200200_900_NS::Sum>(float*, float*, "
       "int, cub::CUB_200200_900_NS::GridEvenShare<int>, cub::CUB_200200_900_NS::Sum)",
       "cub"},
      {"my_fused_gemm_relu(float const*, float*, int)", "custom"},  // "gemm" alone is not cuBLAS
      {"void my_cat::concat_kernel<float>(float*)", "custom"},      // "at::" only as a namespace of its own
      {"void fused_kernel<c10::Half>(c10::Half*)", "custom"},       // ATen types in the arguments
      {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
       "aten"},
  };
  for (const Case& c : cases) EXPECT_EQ(kernel_library(c.name), c.library) << c.name;
}

// Libraries by the binary that launched the kernel: the candidate's module
// is its own code, kloop's worker is kloop, a vendor binary its library,
// any other binary named by its file.
TEST(RecordsTest, ObjectLibraryNamesTheBinary) {
  const std::string path = "/tmp/kloop-work/candidate-1f3a.so";
  const std::vector<std::string> module = {path};
  EXPECT_EQ(object_library(path, module), "custom");
  EXPECT_EQ(object_library(kSelfObject, module), "kloop");
  EXPECT_EQ(object_library("/usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so", module), "aten");
  EXPECT_EQ(object_library("/opt/torch/lib/libc10_cuda.so", module), "aten");
  EXPECT_EQ(object_library("/site-packages/nvidia/cublas/lib/libcublasLt.so.12", module), "cublas");
  EXPECT_EQ(object_library("/site-packages/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", module), "cudnn");
  EXPECT_EQ(object_library("/site-packages/nvidia/cufft/lib/libcufft.so.11", module), "cufft");
  EXPECT_EQ(object_library("/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so", module),
            "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu");
  EXPECT_EQ(object_library("/tmp/kloop-work/other.so", module), "other");  // not the module: not its own
  EXPECT_EQ(object_library("", module), "");
  // A Python candidate's module is its folder: its extensions are its own.
  // With its Triton cache (the launchers Triton compiles for its kernels).
  const std::string folder = "/dev/shm/kloop-work-1/shared/candidate-python/";
  const std::string triton = "/dev/shm/kloop-work-1/sandbox/triton/";
  const std::vector<std::string> python = {folder, triton};
  EXPECT_EQ(object_library(folder + "extensions/relu_ext/relu_ext.so", python), "custom");
  EXPECT_EQ(object_library(triton + "3f/__triton_launcher.cpython-312-x86_64-linux-gnu.so", python), "custom");
  EXPECT_EQ(object_library("/dev/shm/kloop-work-1/shared/candidate-python-other/x.so", python),
            "x");  // a sibling folder is not the module
  EXPECT_EQ(object_library("/dev/shm/kloop-work-1/sandbox/triton-other/y.so", python), "y");
  EXPECT_EQ(object_library("/usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so", python), "aten");
}

TEST(RecordsTest, TemplateAndVendorMarksOfKernelNames) {
  EXPECT_EQ(template_library("void cub::_V_300000_SM_900::detail::reduce::DeviceReduceKernel<int>(int*)"), "cub");
  EXPECT_EQ(template_library("void thrust::cuda_cub::core::_kernel_agent<int>(int)"), "thrust");
  EXPECT_EQ(template_library("void cutlass::Kernel2<cutlass_80_gemm>(int)"), "cutlass");
  EXPECT_EQ(template_library("void cute::launch_kernel<int>(int)"), "cute");
  EXPECT_EQ(template_library("relu(float const*, float*, long)"), "");
  EXPECT_EQ(vendor_kernel_mark("nvjet_tst_128x64_64x8_1x2_h_bz_TNT"), "cublas");
  EXPECT_EQ(vendor_kernel_mark("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"), "cublas");
  EXPECT_EQ(vendor_kernel_mark("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw"), "cudnn");
  // An author's names that merely resemble a vendor's stay the author's.
  EXPECT_EQ(vendor_kernel_mark("sm90_gemm_tiled(float const*, float const*, float*, int)"), "");
  EXPECT_EQ(vendor_kernel_mark("winograd_conv3x3(float const*, float*)"), "");
  EXPECT_EQ(vendor_kernel_mark("void cutlass::Kernel2<Gemm>(Gemm::Params)"), "");
  // torch.compile's kernels, launched from the Triton cache like the
  // candidate's own Triton kernels, are Inductor's by their names.
  EXPECT_EQ(vendor_kernel_mark("triton_poi_fused_relu_0"), "inductor");
  EXPECT_EQ(vendor_kernel_mark("triton_red_fused__log_softmax_0"), "inductor");
  EXPECT_EQ(vendor_kernel_mark("triton_per_fused_sum_1"), "inductor");
  EXPECT_EQ(vendor_kernel_mark("triton_tem_fused_mm_0"), "inductor");
  EXPECT_EQ(kernel_library("triton_poi_fused_add_relu_2"), "inductor");
  EXPECT_EQ(vendor_kernel_mark("relu_kernel"), "");           // a hand-written Triton kernel
  EXPECT_EQ(vendor_kernel_mark("triton_relu_kernel"), "");    // named by its author
}

TEST(RecordsTest, VendorLibrariesOfATrace) {
  ActivityTrace t;
  for (const char* name : {"ampere_sgemm_128x64_nn", "my_kernel(float*)", "ampere_sgemm_128x64_nn",
                           "void at::native::reduce_kernel<512, 1>(int)"}) {
    KernelRecord k;
    k.name = name;
    t.kernels.push_back(k);
  }
  EXPECT_EQ(vendor_libraries(t), (std::vector<std::string>{"aten", "cublas"}));
  EXPECT_TRUE(vendor_libraries(ActivityTrace{}).empty());
}

}  // namespace
}  // namespace kloop::profiler
