"""kloop's side of a KernelBench-format candidate: a Python file whose
ModelNew is a torch.nn.Module, possibly calling kernels it builds with
torch.utils.cpp_extension.load_inline (docs/kernelbench.md).

Two uses, one file:

* At build time, as a script in the compile sandbox:
      python3 -I candidate_host.py build CANDIDATE.py EXTENSIONS_DIR
  imports the candidate once, so its load_inline calls compile their
  extensions into EXTENSIONS_DIR/<name>/<name>.so, and checks that it
  defines ModelNew. Anything it prints is the build log; a non-zero exit
  status is a compile_error. Torch writes each extension's build.ninja as
  it always does; before ninja runs it, two changes that leave the module
  the same (extension_build.py) make it faster, and the log says which
  were made and how long each step of ninja took.
* Outside the sandbox, run by kloop itself (never with a candidate):
      python3 -I candidate_host.py pch OUTDIR cpu|cuda
  precompiles torch/extension.h with the flags torch gives an
  extension's main.cpp (extension_build.make_pch).
* In the candidate's worker (kloop-worker with the interpreter embedded,
  python_host.cpp), as the module `kloop_candidate_host`: open() imports
  the candidate with load_inline replaced by an import of what the build
  made (the worker neither compiles nor writes), create_seeded() builds
  ModelNew as KernelBench's eval does (torch seeded right before the
  constructor, which runs on the CPU without gradients; then
  .to(device, float32)), so its parameters equal the reference's by
  construction whatever it calls them; create() builds it and loads
  weights by state_dict name (kloop's drawn construction); forward() calls
  it. Tensors cross as DLPack capsules, so they share memory with the
  worker's.
"""

import importlib.util
import inspect
import os
import sys

CANDIDATE_MODULE = "kloop_candidate"


def _extension_file(root, name):
    """The library torch's load_inline made for `name` under `root`."""
    folder = os.path.join(root, name)
    exact = os.path.join(folder, name + ".so")
    if os.path.isfile(exact):
        return exact
    # A name loaded twice with different sources in one process gets _v1, _v2...
    versions = sorted(f for f in os.listdir(folder) if f.startswith(name + "_v") and f.endswith(".so")) \
        if os.path.isdir(folder) else []
    return os.path.join(folder, versions[-1]) if versions else None


# The extensions ModelNew asked for after the import (in __init__ or
# forward), which the build did not make: the verdict names them, since a
# ModelNew that catches the ImportError runs without its kernel.
_RUNTIME_BUILDS = []


def runtime_builds():
    return list(_RUNTIME_BUILDS)


def _prebuilt_loader(root):
    def load_prebuilt(name, *args, **kwargs):
        path = _extension_file(root, name)
        if path is None:
            if name not in _RUNTIME_BUILDS:
                _RUNTIME_BUILDS.append(str(name))
            raise ImportError(
                "kloop: extension '%s' was not built when the candidate was compiled; call load_inline "
                "at the module's top level (not inside ModelNew) so that the build step compiles it" % name)
        if not kwargs.get("is_python_module", True):
            import torch
            torch.ops.load_library(path)
            return path if kwargs.get("is_standalone", False) else None
        spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load_prebuilt


def _import_candidate(path):
    spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, path)
    if spec is None:
        raise ImportError("kloop: cannot read the candidate file " + path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[CANDIDATE_MODULE] = module
    spec.loader.exec_module(module)
    return module


def _model_class(module):
    import torch
    cls = getattr(module, "ModelNew", None)
    if cls is None:
        raise TypeError("the file defines no ModelNew: KernelBench's format is a class ModelNew(torch.nn.Module) "
                        "with the reference Model's constructor arguments and forward inputs")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise TypeError("ModelNew is not a torch.nn.Module subclass")
    return cls


# ---- build time ------------------------------------------------------------

def build(candidate, extensions):
    os.makedirs(extensions, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = extensions
    import torch.utils.cpp_extension as cpp
    real_inline, real_load = cpp.load_inline, cpp.load

    # Every extension goes where the worker will look for it.
    def load_inline(*args, **kwargs):
        kwargs.pop("build_directory", None)
        return real_inline(*args, **kwargs)

    def load(*args, **kwargs):
        kwargs.pop("build_directory", None)
        return real_load(*args, **kwargs)

    cpp.load_inline, cpp.load = load_inline, load
    extension_build.install(cpp, os.environ.get("KLOOP_EXTENSION_PCH", ""))
    _model_class(_import_candidate(candidate))
    built = sorted(d for d in os.listdir(extensions) if _extension_file(extensions, d))
    print("kloop: the candidate imports; extensions built: " + (", ".join(built) if built else "none"))


# ---- in the worker ---------------------------------------------------------

def open_candidate(path, extensions):
    """ModelNew and its forward's tensor count (-1: *args)."""
    import torch
    import torch.utils.cpp_extension as cpp
    torch.set_grad_enabled(False)
    loader = _prebuilt_loader(extensions)
    cpp.load_inline, cpp.load = loader, loader
    cls = _model_class(_import_candidate(path))
    params = list(inspect.signature(cls.forward).parameters.values())[1:]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return cls, -1
    return cls, sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _tensor(capsule, was_bool):
    import torch.utils.dlpack
    t = torch.utils.dlpack.from_dlpack(capsule)
    return t.bool() if was_bool else t


def _dtype(name):
    """The torch dtype a kloop dtype name (float32, float16, bfloat16) names."""
    import torch
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if name not in dtypes:
        raise ValueError("kloop: the run's precision '%s' is not one of %s" % (name, ", ".join(dtypes)))
    return dtypes[name]


def create(cls, args, weights, device, dtype="float32"):
    """ModelNew(*args) on `device` in `dtype` (KernelBench's
    .to(device, dtype): floating-point parameters and buffers), with every weight the problem has under
    the same state_dict name; `weights` maps names to (capsule, was_bool).
    Returns the model and the problem's weights the candidate has no place
    for (those it keeps its own initialisation of are reported, not fatal:
    wrong values fail the tests)."""
    model = cls(*args)
    model = model.to(device)
    if dtype != "float32":
        model = model.to(dtype=_dtype(dtype))
    state = {name: _tensor(c, b) for name, (c, b) in weights.items()}
    own = model.state_dict()
    unused = sorted(n for n in state if n not in own)
    for name in unused:
        del state[name]
    mismatched = [n for n in state if tuple(own[n].shape) != tuple(state[n].shape)]
    if mismatched:
        raise ValueError("ModelNew's state_dict entries %s have other shapes than the reference's (%s)" % (
            ", ".join(mismatched), ", ".join("%s %s" % (n, tuple(state[n].shape)) for n in mismatched)))
    model.load_state_dict(state, strict=False)
    # Left in the mode a new module has (training), as KernelBench's eval
    # leaves it and as kloop's references run: batch norm normalises with
    # the batch's statistics (gradients are off: open_candidate).
    return model, unused


def _norm_classes():
    """The classes whose reset_parameters sets a norm layer's affine
    parameters to 1 and 0: BatchNorm and InstanceNorm (_NormBase),
    LayerNorm, GroupNorm (as kloop's references count them)."""
    import torch.nn as nn
    from torch.nn.modules.batchnorm import _NormBase
    return (_NormBase, nn.LayerNorm, nn.GroupNorm)


def create_seeded(cls, args, device, seed, norm_seed, dtype="float32"):
    """ModelNew(*args) as KernelBench's eval builds it: torch's generators
    seeded with `seed` right before the constructor, which runs on the CPU
    with gradients off, then moved with .to(device, dtype) (float32 unless
    the run's precision is fp16 or bf16). With
    `norm_seed` (strict's non-identity parameters), each norm layer built
    meanwhile takes, in the order they are built, weight 0.5 + U[0,1) and
    bias U[0,1) - 0.5 from a generator of its own seeded with `norm_seed`
    (so the seeded stream the other layers draw from is untouched), as the
    reference's norm layers do in registration order; whatever ModelNew
    derives from them in __init__ sees those values. Returns the model and
    the weight shapes of the layers that took values."""
    import torch
    from torch.nn.parameter import UninitializedParameter
    taken = []
    patched = []
    if norm_seed is not None:
        generator = torch.Generator().manual_seed(norm_seed)

        def reset(original):
            def reset_parameters(self):
                original(self)
                weight = getattr(self, "weight", None)
                if not isinstance(weight, torch.Tensor) or isinstance(weight, UninitializedParameter):
                    return  # not affine (yet)
                bias = getattr(self, "bias", None)
                with torch.no_grad():
                    weight.copy_(torch.rand(tuple(weight.shape), generator=generator) + 0.5)
                    if isinstance(bias, torch.Tensor):
                        bias.copy_(torch.rand(tuple(bias.shape), generator=generator) - 0.5)
                taken.append(list(weight.shape))
            return reset_parameters

        for klass in _norm_classes():
            original = klass.__dict__["reset_parameters"]
            patched.append((klass, original))
            klass.reset_parameters = reset(original)
    try:
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed(seed)
        with torch.no_grad():
            model = cls(*args)
    finally:
        for klass, original in patched:
            klass.reset_parameters = original
    # Left in the mode a new module has (training), as KernelBench's eval
    # leaves it and as kloop's references run.
    return model.to(device=device, dtype=_dtype(dtype)), taken


def forward(model, inputs):
    """The outputs as (capsule, was_bool) pairs; `inputs` as create's weights."""
    import torch
    import torch.utils.dlpack
    out = model(*[_tensor(c, b) for c, b in inputs])
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    result = []
    for i, t in enumerate(outs):
        if not isinstance(t, torch.Tensor):
            raise TypeError("forward returned a %s as output %d, not a tensor" % (type(t).__name__, i))
        t = t.detach()
        was_bool = t.dtype == torch.bool
        if was_bool:
            t = t.to(torch.uint8)
        result.append((torch.utils.dlpack.to_dlpack(t), was_bool))
    return result


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("build", "pch"):
        sys.exit("usage: candidate_host.py build CANDIDATE.py EXTENSIONS_DIR | pch OUTDIR cpu|cuda")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import extension_build
    try:
        if sys.argv[1] == "pch":
            extension_build.make_pch(sys.argv[2], sys.argv[3])
        else:
            build(sys.argv[2], sys.argv[3])
    except SystemExit:
        raise
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
