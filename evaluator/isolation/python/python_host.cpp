// libkloop_python_host.so: the embedded interpreter behind a Python
// candidate (python_host.h). Every call into Python holds the GIL; between
// calls the worker's thread runs without it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
// Python.h first, as its documentation asks.
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <dlfcn.h>

#include <stdexcept>

#include "evaluator/isolation/python/python_host.h"

namespace kloop::python_host {
namespace {

// Owns one reference.
class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* p) : p_(p) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  ~Ref() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  PyObject* release() {
    PyObject* p = p_;
    p_ = nullptr;
    return p;
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

// The pending exception with its traceback, as Python prints it (the
// feedback a candidate's author gets), and cleared.
std::string python_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  if (!type) return "an unknown Python error";
  PyErr_NormalizeException(&type, &value, &tb);
  Ref t(type), v(value), b(tb);
  std::string text;
  Ref traceback(PyImport_ImportModule("traceback"));
  if (traceback) {
    Ref lines(PyObject_CallMethod(traceback.get(), "format_exception", "OOO", type, value ? value : Py_None,
                                  tb ? tb : Py_None));
    if (lines && PyList_Check(lines.get())) {
      for (Py_ssize_t i = 0; i < PyList_Size(lines.get()); ++i) {
        const char* s = PyUnicode_AsUTF8(PyList_GetItem(lines.get(), i));
        if (s) text += s;
      }
    }
  }
  if (text.empty()) {
    Ref s(PyObject_Str(value ? value : type));
    const char* c = s ? PyUnicode_AsUTF8(s.get()) : nullptr;
    text = c ? c : "an unprintable Python error";
  }
  PyErr_Clear();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

[[noreturn]] void throw_python_error(const std::string& what) {
  throw std::runtime_error(what + ":\n" + python_error());
}

void free_capsule(PyObject* capsule) {
  // A capsule torch consumed was renamed "used_dltensor"; one it never
  // consumed still owns its tensor.
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m && m->deleter) m->deleter(m);
}

// (capsule, was_bool): DLPack in LibTorch 1.13 has no bool, so a bool
// tensor crosses as uint8 (a copy) and is turned back on the other side.
Ref to_python(const at::Tensor& t) {
  const bool was_bool = t.scalar_type() == at::kBool;
  DLManagedTensor* m = at::toDLPack(was_bool ? t.to(at::kByte) : t);
  Ref capsule(PyCapsule_New(m, "dltensor", free_capsule));
  if (!capsule) {
    m->deleter(m);
    throw_python_error("kloop: cannot hand a tensor to Python");
  }
  return Ref(Py_BuildValue("(OO)", capsule.get(), was_bool ? Py_True : Py_False));
}

at::Tensor from_python(PyObject* pair) {
  PyObject* capsule = nullptr;
  int was_bool = 0;
  if (!PyArg_ParseTuple(pair, "Op", &capsule, &was_bool)) throw_python_error("kloop: an output did not cross");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (!m) throw_python_error("kloop: an output's DLPack capsule is not valid");
  at::Tensor t = at::fromDLPack(m);
  PyCapsule_SetName(capsule, "used_dltensor");
  return was_bool ? t.to(at::kBool) : t;
}

Ref python_value(const Arg& a, PyObject* json_loads) {
  Ref v(PyObject_CallFunction(json_loads, "s", a.json.c_str()));
  if (!v) throw_python_error("kloop: a constructor argument does not parse");
  // KernelBench passes shapes and kernel sizes as tuples.
  if (a.type == "ints" && PyList_Check(v.get())) return Ref(PyList_AsTuple(v.get()));
  return v;
}

class PythonModule : public ModuleRunner {
 public:
  PythonModule(PyObject* forward, PyObject* model) : forward_(forward), model_(model) {}
  ~PythonModule() override {
    Gil gil;
    Py_XDECREF(model_);
    Py_XDECREF(forward_);
  }

  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) override {
    Gil gil;
    Ref list(PyList_New(0));
    for (const auto& t : inputs) {
      Ref pair = to_python(t);
      if (!pair || PyList_Append(list.get(), pair.get()) != 0) throw_python_error("kloop: cannot pass the inputs");
    }
    Ref out(PyObject_CallFunctionObjArgs(forward_, model_, list.get(), nullptr));
    if (!out) throw_python_error("ModelNew.forward raised");
    std::vector<at::Tensor> result;
    for (Py_ssize_t i = 0; i < PyList_Size(out.get()); ++i) result.push_back(from_python(PyList_GetItem(out.get(), i)));
    return result;
  }

 private:
  PyObject* forward_;  // candidate_host.forward
  PyObject* model_;
};

class EmbeddedHost : public Host {
 public:
  EmbeddedHost(Ref host, Ref cls, int arity, std::string device)
      : host_(std::move(host)), cls_(std::move(cls)), arity_(arity), device_(std::move(device)) {}

  ~EmbeddedHost() override {
    Gil gil;
    Py_XDECREF(cls_.release());
    Py_XDECREF(host_.release());
  }

  int arity() const override { return arity_; }

  std::unique_ptr<ModuleRunner> create(const std::vector<std::pair<std::string, at::Tensor>>& weights,
                                       const std::vector<Arg>& args, std::vector<std::string>& unused,
                                       const std::string& dtype) override {
    Gil gil;
    Ref arg_tuple = arguments(args);
    Ref state(PyDict_New());
    for (const auto& [name, t] : weights) {
      Ref pair = to_python(t);
      if (!pair || PyDict_SetItemString(state.get(), name.c_str(), pair.get()) != 0) {
        throw_python_error("kloop: cannot pass the weights");
      }
    }
    Ref made(
        PyObject_CallMethod(host_.get(), "create", "OOOss", cls_.get(), arg_tuple.get(), state.get(), device_.c_str(),
                            dtype.empty() ? "float32" : dtype.c_str()));
    if (!made) throw_python_error("constructing ModelNew raised");
    PyObject* model = nullptr;
    PyObject* left = nullptr;
    if (!PyArg_ParseTuple(made.get(), "OO", &model, &left)) throw_python_error("kloop: create answered oddly");
    for (Py_ssize_t i = 0; PyList_Check(left) && i < PyList_Size(left); ++i) {
      const char* s = PyUnicode_AsUTF8(PyList_GetItem(left, i));
      if (s) unused.emplace_back(s);
    }
    return runner(model);
  }

  std::unique_ptr<ModuleRunner> create_seeded(const std::vector<Arg>& args, uint64_t seed,
                                              std::optional<uint64_t> norm_seed,
                                              std::vector<std::vector<int64_t>>& norm_layers,
                                              const std::string& dtype) override {
    Gil gil;
    Ref arg_tuple = arguments(args);
    Ref seed_value(PyLong_FromUnsignedLongLong(seed));
    Ref norm_value(norm_seed ? PyLong_FromUnsignedLongLong(*norm_seed) : (Py_INCREF(Py_None), Py_None));
    Ref made(PyObject_CallMethod(host_.get(), "create_seeded", "OOsOOs", cls_.get(), arg_tuple.get(), device_.c_str(),
                                 seed_value.get(), norm_value.get(), dtype.empty() ? "float32" : dtype.c_str()));
    if (!made) throw_python_error("constructing ModelNew raised");
    PyObject* model = nullptr;
    PyObject* taken = nullptr;
    if (!PyArg_ParseTuple(made.get(), "OO", &model, &taken) || !PyList_Check(taken)) {
      throw_python_error("kloop: create_seeded answered oddly");
    }
    for (Py_ssize_t i = 0; i < PyList_Size(taken); ++i) {
      PyObject* shape = PyList_GetItem(taken, i);
      std::vector<int64_t> dims;
      for (Py_ssize_t k = 0; PyList_Check(shape) && k < PyList_Size(shape); ++k) {
        dims.push_back(PyLong_AsLongLong(PyList_GetItem(shape, k)));
      }
      norm_layers.push_back(std::move(dims));
    }
    return runner(model);
  }

  std::vector<std::string> runtime_builds() override {
    Gil gil;
    Ref names(PyObject_CallMethod(host_.get(), "runtime_builds", nullptr));
    if (!names || !PyList_Check(names.get())) throw_python_error("kloop: runtime_builds answered oddly");
    std::vector<std::string> out;
    for (Py_ssize_t i = 0; i < PyList_Size(names.get()); ++i) {
      const char* s = PyUnicode_AsUTF8(PyList_GetItem(names.get(), i));
      if (s) out.emplace_back(s);
    }
    return out;
  }

 private:
  // The constructor's arguments as get_init_inputs() passes them.
  static Ref arguments(const std::vector<Arg>& args) {
    Ref json(PyImport_ImportModule("json"));
    Ref loads(json ? PyObject_GetAttrString(json.get(), "loads") : nullptr);
    if (!loads) throw_python_error("kloop: Python's json module is missing");
    Ref arg_tuple(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
    for (std::size_t i = 0; i < args.size(); ++i) {
      PyTuple_SetItem(arg_tuple.get(), static_cast<Py_ssize_t>(i), python_value(args[i], loads.get()).release());
    }
    return arg_tuple;
  }

  // A runner calling candidate_host.forward on `model` (borrowed here).
  std::unique_ptr<ModuleRunner> runner(PyObject* model) {
    Ref forward(PyObject_GetAttrString(host_.get(), "forward"));
    if (!forward) throw_python_error("kloop: candidate_host has no forward");
    Py_INCREF(model);
    return std::make_unique<PythonModule>(forward.release(), model);
  }

  Ref host_;  // the candidate_host module
  Ref cls_;   // ModelNew
  int arity_;
  std::string device_;
};

// Starts the interpreter once, on the worker's main thread, with the
// search path of the python3 the candidate was built with (neither the
// environment nor the user's site folder has a say).
bool start_interpreter(const Options& o, std::string* error) {
  if (Py_IsInitialized()) return true;
  // Extension modules (torch._C) resolve Python's symbols globally, but the
  // worker opened this library (and with it libpython) locally.
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&Py_InitializeFromConfig), &info) && info.dli_fname) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
  // UTF-8 mode, as python3 runs in the UTF-8 locales KernelBench's eval
  // meets: files opened without an encoding (cupy writes its RawModule
  // source so before NVRTC compiles it) are UTF-8. The isolated
  // configuration would leave them ASCII in the worker's C locale.
  PyPreConfig pre;
  PyPreConfig_InitIsolatedConfig(&pre);
  pre.utf8_mode = 1;
  if (PyStatus p = Py_PreInitialize(&pre); PyStatus_Exception(p)) {
    *error = std::string("kloop: cannot start Python: ") + (p.err_msg ? p.err_msg : "?");
    return false;
  }
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);
  config.write_bytecode = 0;
  config.install_signal_handlers = 0;
  config.site_import = 0;
  config.module_search_paths_set = 1;
  auto fail = [&](PyStatus s) {
    *error = std::string("kloop: cannot start Python: ") + (s.err_msg ? s.err_msg : "?");
    PyConfig_Clear(&config);
    return false;
  };
  std::vector<std::string> paths = {o.host_script.substr(0, o.host_script.find_last_of('/'))};
  paths.insert(paths.end(), o.sys_path.begin(), o.sys_path.end());
  for (const auto& p : paths) {
    wchar_t* w = Py_DecodeLocale(p.c_str(), nullptr);
    if (!w) continue;
    PyStatus s = PyWideStringList_Append(&config.module_search_paths, w);
    PyMem_RawFree(w);
    if (PyStatus_Exception(s)) return fail(s);
  }
  PyStatus s = Py_InitializeFromConfig(&config);
  if (PyStatus_Exception(s)) return fail(s);
  PyConfig_Clear(&config);
  PyEval_SaveThread();  // each call takes the GIL (Gil)
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) Host* kloop_python_host_open(const Options& o, std::string* error) {
  try {
    if (!start_interpreter(o, error)) return nullptr;
    Gil gil;
    Ref host(PyImport_ImportModule("candidate_host"));
    if (!host) throw_python_error("kloop: cannot import " + o.host_script);
    Ref opened(PyObject_CallMethod(host.get(), "open_candidate", "sss", o.candidate.c_str(), o.extensions.c_str(),
                                          o.device.c_str()));
    if (!opened) throw_python_error("importing the candidate raised");
    PyObject* cls = nullptr;
    int arity = 0;
    if (!PyArg_ParseTuple(opened.get(), "Oi", &cls, &arity)) throw_python_error("kloop: open_candidate answered oddly");
    Py_INCREF(cls);
    return new EmbeddedHost(std::move(host), Ref(cls), arity, o.device);
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}

}  // namespace kloop::python_host
