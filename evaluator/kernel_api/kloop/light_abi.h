// The C ABI of the light kernel API (version 2): plain structs and function
// pointers between kloop and a module built against <kloop/light_api.h>, so
// neither side's C++ types cross it. Modules include <kloop/light_api.h>,
// not this file.
#pragma once

#include <stddef.h>
#include <stdint.h>

#define KLOOP_LIGHT_API_VERSION 2

extern "C" {

enum { KLOOP_MAX_DIMS = 8 };

// One tensor view. `owner` is kloop's handle of the memory; every
// kloop_tensor handed over counts one reference to it, given back with
// kloop_host::release.
typedef struct kloop_tensor {
  void* data;
  void* owner;
  int64_t sizes[KLOOP_MAX_DIMS];
  int64_t strides[KLOOP_MAX_DIMS];
  int32_t dim;
  int32_t dtype;   // kloop::DType
  int32_t device;  // -1: host memory, else the CUDA device index
  int32_t reserved;
} kloop_tensor;

// What kloop provides to the module. Functions returning int return 0 on
// success; on failure last_error() says why.
typedef struct kloop_host {
  int32_t version;  // KLOOP_LIGHT_API_VERSION
  void* ctx;
  int (*empty)(void* ctx, int32_t dtype, int32_t dim, const int64_t* sizes, int32_t zeroed, kloop_tensor* out);
  int (*contiguous)(void* ctx, const kloop_tensor* in, kloop_tensor* out);
  void (*retain)(void* ctx, void* owner);
  void (*release)(void* ctx, void* owner);
  void* (*stream)(void* ctx);  // the cudaStream_t kloop times the module on; null on CPU
  const char* (*last_error)(void* ctx);
} kloop_host;

// The constructor's weights and arguments (valid during construction).
typedef struct kloop_init {
  void* ctx;
  const char* device;  // "cpu" or "cuda:N"
  int (*param)(void* ctx, const char* name, kloop_tensor* out);
  int32_t (*param_count)(void* ctx);
  const char* (*param_name)(void* ctx, int32_t index);
  int (*has_arg)(void* ctx, const char* name);
  int (*arg_int)(void* ctx, const char* name, int64_t* out);
  int (*arg_float)(void* ctx, const char* name, double* out);
  int (*arg_bool)(void* ctx, const char* name, int32_t* out);
  int (*arg_ints)(void* ctx, const char* name, int64_t* out, int32_t capacity, int32_t* count);
  int (*arg_string)(void* ctx, const char* name, char* out, int32_t capacity, int32_t* length);
} kloop_init;

}  // extern "C"

// The module's entry points (exported by KLOOP_REGISTER_CANDIDATE):
//   int   kloop_candidate_api_version(void);    returns 2
//   int   kloop_candidate_forward_arity(void);
//   void* kloop_candidate_light_create(const kloop_host*, const kloop_init*, char* err, size_t capacity);
//   int   kloop_candidate_light_forward(void* module, const kloop_tensor* inputs, int32_t n_inputs,
//                                       kloop_tensor* outputs, int32_t capacity, int32_t* n_outputs,
//                                       char* err, size_t err_capacity);
//   void  kloop_candidate_light_destroy(void* module);
// create and forward return null / nonzero on failure with the reason in err.
typedef void* (*kloop_light_create_fn)(const kloop_host*, const kloop_init*, char*, size_t);
typedef int (*kloop_light_forward_fn)(void*, const kloop_tensor*, int32_t, kloop_tensor*, int32_t, int32_t*, char*,
                                      size_t);
typedef void (*kloop_light_destroy_fn)(void*);
