"""kloop's side of a KernelBench-format candidate: a Python file whose
ModelNew is a torch.nn.Module, possibly calling kernels it builds with
torch.utils.cpp_extension.load_inline (docs/kernelbench.md).

Two uses, one file:

* At build time, as a script in the compile sandbox:
      python3 -I candidate_host.py build CANDIDATE.py EXTENSIONS_DIR [REQUESTS]
  imports the candidate once, so its load_inline calls compile their
  extensions into EXTENSIONS_DIR/<name>/<name>.so, and checks that it
  defines ModelNew; with REQUESTS (runtime build requests an earlier
  evaluation's worker wrote), it then makes those calls too. Anything it prints is the build log; a non-zero exit
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
  made (the worker neither compiles nor writes; an extension asked for
  after the import, in __init__ or forward, is written down as a request
  in the worker's folder, and kloop builds it in the compile sandbox and
  evaluates again: runtime build requests below), create_seeded() builds
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

# Runtime build requests: what each such call asked for (its arguments, and
# for load() the text of its source files), written as a JSON list to
# REQUESTS_FILE in the worker's folder. kloop reads it when the evaluation
# ends, builds the requests in the compile sandbox after importing the file
# again (build below: the same torch calls, made there) and evaluates
# again. A request is only ever compiled where the candidate's own file is,
# so writing the file by hand gains a candidate nothing it could not do at
# import; kloop bounds it (count and size) all the same.
REQUESTS_FILE = "kloop-runtime-builds.json"
MAX_REQUESTS = 16
MAX_REQUEST_BYTES = 1 << 20
_REQUESTS = []
_SIMPLE = (str, bool, int, float, type(None))


def runtime_builds():
    return list(_RUNTIME_BUILDS)


def _jsonable(value):
    if isinstance(value, _SIMPLE):
        return True
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, _SIMPLE) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    return False


def _request(kind, signature, args, kwargs):
    """What a load_inline/load call asked for, as JSON, or None when it
    cannot be written down (arguments that are not text, flags or lists of
    them; a source file that cannot be read)."""
    try:
        bound = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return None
    bound.pop("build_directory", None)
    for key in ("verbose", "keep_intermediates"):
        bound.pop(key, None)
    if not all(_jsonable(v) for v in bound.values()):
        return None
    request = {"kind": kind, "arguments": {k: list(v) if isinstance(v, tuple) else v for k, v in bound.items()}}
    if kind == "load":
        sources = bound.get("sources")
        sources = [sources] if isinstance(sources, str) else list(sources or [])
        files = []
        for path in sources:
            try:
                with open(path, "rb") as f:
                    text = f.read(MAX_REQUEST_BYTES + 1)
            except OSError:
                return None
            if len(text) > MAX_REQUEST_BYTES:
                return None
            files.append({"name": os.path.basename(path), "text": text.decode("utf-8", "replace")})
        request["files"] = files
        request["arguments"]["sources"] = [f["name"] for f in files]
    return request


def _record(request, requests_path):
    if request is None or not requests_path or len(_REQUESTS) >= MAX_REQUESTS or request in _REQUESTS:
        return
    _REQUESTS.append(request)
    import json
    try:
        with open(requests_path, "w", encoding="utf-8") as f:
            json.dump(_REQUESTS, f)
    except OSError:
        pass


def _prebuilt_loader(root, kind, signature, requests_path):
    def load_prebuilt(*args, **kwargs):
        name = kwargs.get("name", args[0] if args else None)
        path = _extension_file(root, name) if isinstance(name, str) and name else None
        if path is None:
            if name not in _RUNTIME_BUILDS:
                _RUNTIME_BUILDS.append(str(name))
            _record(_request(kind, signature, args, kwargs), requests_path)
            raise ImportError(
                "kloop: extension '%s' was not built when the candidate was compiled (ModelNew asked for it after "
                "the import; kloop builds it from this request and evaluates again)" % name)
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

def _replay(requests_file, load_inline, load, extensions):
    """The runtime build requests an earlier evaluation wrote (see
    REQUESTS_FILE), made with torch's own load_inline/load after the
    import. A request that fails to build is reported and left: ModelNew
    meets the same ImportError it met before, as under KernelBench a
    failed build raises inside __init__."""
    import json
    with open(requests_file, encoding="utf-8") as f:
        requests = json.load(f)
    if not isinstance(requests, list):
        raise ValueError("kloop: the runtime build requests are not a list")
    sources_root = os.path.join(os.path.dirname(os.path.abspath(extensions)), "runtime-sources")
    for i, request in enumerate(requests[:MAX_REQUESTS]):
        arguments = dict(request.get("arguments") or {})
        name = arguments.get("name")
        try:
            if request.get("kind") == "load":
                folder = os.path.join(sources_root, str(i))
                os.makedirs(folder, exist_ok=True)
                paths = []
                for f in request.get("files") or []:
                    base = os.path.basename(str(f["name"])) or "source"
                    path = os.path.join(folder, base)
                    with open(path, "w", encoding="utf-8") as out:
                        out.write(str(f["text"]))
                    paths.append(path)
                arguments["sources"] = paths
                load(**arguments)
            elif request.get("kind") == "load_inline":
                load_inline(**arguments)
            else:
                raise ValueError("a request of kind %r" % request.get("kind"))
            print("kloop: built extension '%s', which ModelNew asked for after the import (%s)" % (
                name, request.get("kind")))
        except Exception as e:
            print("kloop: extension '%s', which ModelNew asked for after the import, did not build: %s" % (
                name, str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__))


def build(candidate, extensions, requests_file=None):
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
    if requests_file:
        _replay(requests_file, load_inline, load, extensions)
    built = sorted(d for d in os.listdir(extensions) if _extension_file(extensions, d))
    print("kloop: the candidate imports; extensions built: " + (", ".join(built) if built else "none"))


# ---- in the worker ---------------------------------------------------------

def _warm_libraries(path, device):
    """Makes the cuBLAS and cuDNN handles of this thread on `device`, as
    KernelBench's eval process has them before ModelNew's first forward (it
    ran the reference there first). A ModelNew that captures a CUDA graph
    at its first call, with no warm-up of its own, would otherwise make its
    first cuDNN or cuBLAS call inside the capture, where creating a handle
    invalidates it. Run before the candidate's file is imported, and only
    for a file that speaks of graphs or capture (CUDA graphs, stream
    capture, torch.compile's reduce-overhead): loading cuDNN costs the
    others a second for nothing.
    kloop's kernels, not the candidate's (the activity audit counts the
    calls' kernels only)."""
    import torch
    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().lower()
    except OSError:
        return
    if "graph" not in text and "capture" not in text and "reduce-overhead" not in text:
        return
    with torch.no_grad():
        a = torch.ones(8, 8, device=device)
        torch.mm(a, a)
        image = torch.ones(1, 1, 4, 4, device=device)
        weight = torch.ones(1, 1, 3, 3, device=device)
        torch.nn.functional.conv2d(image, weight)
        torch.nn.functional.conv_transpose2d(image, weight)
    torch.cuda.synchronize(device)


def open_candidate(path, extensions, device=""):
    """ModelNew and its forward's tensor count (-1: *args)."""
    import torch
    import torch.utils.cpp_extension as cpp
    torch.set_grad_enabled(False)
    _warm_libraries(path, device)
    requests_path = os.path.join(os.getcwd(), REQUESTS_FILE)
    cpp.load_inline, cpp.load = (
        _prebuilt_loader(extensions, "load_inline", inspect.signature(cpp.load_inline), requests_path),
        _prebuilt_loader(extensions, "load", inspect.signature(cpp.load), requests_path))
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


def _refuse_hollow_subclass(t, i):
    """A torch.Tensor subclass whose data is not the shape it reports (a
    lazy result, computed only if someone asks): the judge reads the data,
    so the verdict says why instead of a bare shape mismatch. The message
    only; the judge's own shape check fails such an output either way."""
    import torch
    try:
        held = tuple(torch.Tensor.size(t))
        said = tuple(t.shape)
    except Exception:
        return
    if held != said:
        raise TypeError(
            "forward returned a %s (a torch.Tensor subclass) as output %d whose data has shape %s while it "
            "reports %s: kloop judges the data a tensor holds, not what a subclass reports (a lazy result is "
            "never computed); return a plain torch.Tensor that holds the result"
            % (type(t).__name__, i, list(held), list(said)))


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
        if type(t) is not torch.Tensor:
            _refuse_hollow_subclass(t, i)
        t = t.detach()
        was_bool = t.dtype == torch.bool
        if was_bool:
            t = t.to(torch.uint8)
        result.append((torch.utils.dlpack.to_dlpack(t), was_bool))
    return result


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in ("build", "pch") or (len(sys.argv) == 5 and sys.argv[1] != "build"):
        sys.exit("usage: candidate_host.py build CANDIDATE.py EXTENSIONS_DIR [REQUESTS.json] | pch OUTDIR cpu|cuda")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import extension_build
    try:
        if sys.argv[1] == "pch":
            extension_build.make_pch(sys.argv[2], sys.argv[3])
        else:
            build(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) == 5 else None)
    except SystemExit:
        raise
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
