#!/usr/bin/env python3
"""Runs one upstream (KernelBench-format) task on kloop's weights and inputs.

Once per task, with the machine's python3 and torch:

    upstream_parity.py --task UPSTREAM.py --args ARGS.json --weights W.safetensors
                       --inputs I.safetensors --out O.safetensors [--dims DIMS.json] [--device cpu|cuda]

or, as `kloop problems parity` runs it, once for every task: with --serve it
reads one request per line from the socket on descriptor 3 (a JSON object
with the flags' names as keys: task, args, weights, inputs, out, dims,
device) and answers each with its JSON line there, so Python, torch and CUDA
start once rather than per task (3.6 s of import alone on the H200).

The task file defines `Model` (a torch.nn.Module), `get_inputs` and
`get_init_inputs`. The model is built from kloop's constructor arguments by
parameter name (a parameter kloop does not list keeps its default), its
state_dict is replaced by kloop's weights (same names and shapes, or the
task is a key mismatch), and forward runs on kloop's inputs. With --seed
(KernelBench's construction) the model is built after torch.manual_seed,
keeps its own initialisation, and its state_dict is compared with kloop's
seeded reference's bit for bit (a weights mismatch names what differs). The outputs go
to O.safetensors (kloop's tensor files are safetensors); one JSON line (on
stdout, or the socket) says what happened.

A request with `compile` (a torch.compile mode: default, reduce-overhead)
is a baseline instead (`kloop baseline --compile`): the same Model on the
same weights and inputs, compiled, warmed up until compilation is done
(not timed), then timed like KernelBench's current eval times it (CUDA
events, L2 thrashed before each trial, the device synchronised after it;
wall clock on the CPU); its outputs are written too, so kloop judges the
compiled model before its time counts. `dtype` (float16, bfloat16) turns
the model's floating-point parameters and buffers to the run's precision,
as the inputs already are. A request with `probe` only answers which torch
this is and whether it has torch.compile (it needs torch >= 2.0): kloop
asks before it relies on one, and fails closed with that message.

Upstream runs at the precision kloop's references run at: full FP32, TF32
off for cuBLAS and cuDNN. PyTorch's own default lets cuDNN convolutions use
TF32 (as KernelBench's eval leaves it), which moves a convolution's outputs
by ~1e-3 of their size against kloop's FP32 and would be reported as the
port's difference. Each answer says what the flags were when forward ran
(`tf32`), and kloop refuses a row whose upstream ran with TF32.
"""
import argparse
import gc
import importlib.util
import inspect
import json
import mmap
import os
import socket
import struct
import sys

import torch

# kloop's tensor files are safetensors (evaluator/runtime/host_tensor.h);
# read and written here with the standard library, so the safetensors
# package is not needed. kloop's dtypes, in the order of dtype.h.
DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def read_tensors(path):
    """The tensors of a safetensors file, in the header's order.

    Each is a view of a private (copy-on-write) mapping of the file, so a
    tensor of several GB (upstream sizes) is not read into a bytes object
    and copied again before it is used; a tensor whose offset does not suit
    its dtype's alignment is copied out.
    """
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len).decode("utf-8"))  # keeps the file's key order
        size = os.fstat(f.fileno()).st_size
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if size > 8 + header_len else None
    base = 8 + header_len
    out = []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        dtype = DTYPES[e["dtype"]]
        itemsize = torch.empty(0, dtype=dtype).element_size()
        count = (end - begin) // itemsize
        if count == 0:
            t = torch.empty(0, dtype=dtype)
        elif (base + begin) % itemsize == 0:
            t = torch.frombuffer(mapped, dtype=dtype, count=count, offset=base + begin)
        else:
            t = torch.frombuffer(bytearray(mapped[base + begin:base + end]), dtype=dtype)
        out.append((name, t.reshape(e["shape"])))
    return out


def write_tensors(path, tensors):
    """A safetensors file of (name, tensor) pairs, in their order, each
    tensor's bytes written from its own memory (no copy into a bytes object)."""
    names = {v: k for k, v in DTYPES.items()}
    header, arrays, offset = {}, [], 0
    for name, t in tensors:
        t = t.detach().to("cpu").contiguous()
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        if nbytes:
            arrays.append(t.reshape(-1).view(torch.uint8).numpy())
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays:
            f.write(memoryview(a))


def say(**fields):
    print(json.dumps(fields), flush=True)


def full_fp32():
    """TF32 off where PyTorch could use it (matmuls, cuDNN convolutions), as
    kloop's references run; set per task, so nothing a task file does to
    the flags at import outlives the import."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def tf32_flags():
    return dict(cublas=bool(torch.backends.cuda.matmul.allow_tf32), cudnn=bool(torch.backends.cudnn.allow_tf32))


def compile_unavailable():
    """Why torch.compile cannot run here ("" when it can)."""
    version = torch.__version__
    try:
        major = int(version.split(".")[0])
    except ValueError:
        major = 0
    if major < 2 or not hasattr(torch, "compile"):
        return "torch.compile needs torch >= 2.0; this torch is %s" % ".".join(version.split("+")[0].split(".")[:2])
    return ""


def probe():
    return dict(ok=True, torch=torch.__version__, compile=compile_unavailable() == "",
                why=compile_unavailable(), cuda=torch.version.cuda or "")


def time_compiled(model, inputs, a):
    """Seconds per call of the compiled model: warm-ups until compilation is
    done (excluded), then `trials` timed calls, each after the L2 is
    thrashed (CUDA), as KernelBench's time_execution_with_cuda_event does."""
    import time
    warmup = int(getattr(a, "warmup", 3) or 3)
    trials = int(getattr(a, "trials", 100) or 100)
    cuda = str(a.device).startswith("cuda")
    compile_start = time.perf_counter()
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
            if cuda:
                torch.cuda.synchronize()
    compile_seconds = time.perf_counter() - compile_start
    times = []
    scratch = torch.empty((32, 1024, 1024), dtype=torch.int64, device=a.device) if cuda else None
    with torch.no_grad():
        for _ in range(trials):
            if cuda:
                torch.cuda.synchronize()
                scratch.fill_(42)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                model(*inputs)
                times.append(time.perf_counter() - t0)
    return times, compile_seconds


def run_task(a):
    """One task (`a` has the flags' names as attributes): what to say of it."""
    if getattr(a, "probe", None):
        return probe()
    mode = getattr(a, "compile", None)
    if mode:
        why = compile_unavailable()
        if why:
            return dict(ok=False, kind="compile_unavailable", error=why, torch=torch.__version__)
        if mode not in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
            return dict(ok=False, kind="error", error="'%s' is not a torch.compile mode" % mode)
    torch.manual_seed(0)
    spec = importlib.util.spec_from_file_location("upstream_task", a.task)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The task's module-level sizes (batch_size, ...) at kloop's dims, for
    # modules that read them (a hidden state drawn at the batch size).
    if a.dims:
        with open(a.dims) as f:
            for name, value in json.load(f).items():
                if hasattr(module, name) and isinstance(getattr(module, name), int):
                    setattr(module, name, value)

    with open(a.args) as f:
        kloop_args = {x["name"]: x["value"] for x in json.load(f)}
    params = [p for p in inspect.signature(module.Model.__init__).parameters.values() if p.name != "self"]
    kwargs = {}
    missing_args = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in kloop_args:
            kwargs[p.name] = kloop_args[p.name]
        elif p.default is inspect.Parameter.empty:
            missing_args.append(p.name)
    if missing_args:
        return dict(ok=False, kind="arg_mismatch", error="constructor parameter(s) %s are not among kloop's args %s"
                    % (missing_args, sorted(kloop_args)))
    seed = getattr(a, "seed", None)
    if seed is not None:
        # KernelBench's construction: the generator seeded right before the
        # constructor, on the CPU, without gradients.
        torch.manual_seed(seed)
        with torch.no_grad():
            model = module.Model(**kwargs)
    else:
        model = module.Model(**kwargs)

    weights = dict(read_tensors(a.weights))
    state = model.state_dict()
    upstream_only = sorted(k for k in state if k not in weights)
    kloop_only = sorted(k for k in weights if k not in state)
    shapes = sorted("%s: upstream %s, kloop %s" % (k, list(state[k].shape), list(weights[k].shape))
                    for k in state if k in weights and tuple(state[k].shape) != tuple(weights[k].shape))
    if upstream_only or kloop_only or shapes:
        return dict(ok=False, kind="key_mismatch", upstream_only=upstream_only, kloop_only=kloop_only, shapes=shapes)
    if seed is not None:
        # kloop's seeded reference against upstream's seeded Model, tensor by
        # tensor, bit for bit (the dtype too).
        differ = []
        for k in state:
            mine, theirs = state[k].detach().cpu(), weights[k]
            if mine.dtype != theirs.dtype:
                differ.append("%s: dtype upstream %s, kloop %s" % (k, mine.dtype, theirs.dtype))
            elif not torch.equal(mine.view(torch.uint8) if mine.dtype == torch.bool else mine,
                                 theirs.view(torch.uint8) if theirs.dtype == torch.bool else theirs):
                worst = (mine.double() - theirs.double()).abs().max().item() if mine.is_floating_point() else None
                differ.append("%s (max abs difference %s)" % (k, "%.3g" % worst if worst is not None else "n/a"))
        if differ:
            return dict(ok=False, kind="weights_mismatch", weights_compared=len(state), differ=differ[:20])
    else:
        dtype = getattr(a, "dtype", None)
        if dtype:
            # The run's precision (KernelBench's model.to(dtype)): kloop's weights are in it already.
            model = model.to(dtype=DTYPES[{"float16": "F16", "bfloat16": "BF16", "float32": "F32"}[dtype]])
            state = model.state_dict()
        model.load_state_dict({k: weights[k].to(state[k].dtype) for k in state})
    # In the mode a new module has (training), as KernelBench runs it and as
    # kloop's references run: batch norm on the batch's statistics.
    model = model.to(a.device)

    inputs = [t.to(a.device) for _, t in read_tensors(a.inputs)]
    full_fp32()
    times, compile_seconds = None, None
    if mode:
        model = torch.compile(model, mode=mode)
        times, compile_seconds = time_compiled(model, inputs, a)
    with torch.no_grad():
        out = model(*inputs)
    tf32 = tf32_flags()  # as forward left them
    if not isinstance(out, (tuple, list)):
        out = [out]
    outs = []
    for i, t in enumerate(out):
        if not torch.is_tensor(t):
            t = torch.tensor(t)
        outs.append(("output%d" % i, t))
    write_tensors(a.out, outs)
    reply = dict(ok=True, outputs=len(outs), state_dict_keys=len(state), tf32=tf32,
                 weights_compared=len(state) if seed is not None else 0)
    if mode:
        reply.update(times=times, compile_seconds=compile_seconds, torch=torch.__version__, mode=mode)
    return reply


def answer(a):
    """run_task's answer, or the task file's own failure as one (a result,
    not a crash of the harness)."""
    try:
        return run_task(a)
    except Exception as e:
        return dict(ok=False, kind="error", error="%s: %s" % (type(e).__name__, e))


def serve():
    """Requests on descriptor 3 until kloop closes it; one answer each."""
    channel = socket.socket(fileno=3).makefile("rwb")
    for line in channel:
        if not line.strip():
            continue
        request = json.loads(line)
        a = argparse.Namespace(dims=None, device="cpu", seed=None, compile=None, probe=None, dtype=None)
        for key, value in request.items():
            setattr(a, key, value)
        reply = answer(a)
        # What the task held goes before the next one is built.
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
        channel.write((json.dumps(reply) + "\n").encode("utf-8"))
        channel.flush()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", action="store_true", help="answer requests on descriptor 3, one per line")
    for flag in ("--task", "--args", "--weights", "--inputs", "--out"):
        ap.add_argument(flag)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dims", help="kloop's dims (JSON): module-level globals of the same names take these values")
    ap.add_argument("--compile", help="time Model under torch.compile in this mode (a baseline) instead")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--dtype", help="float16 or bfloat16: the run's precision")
    ap.add_argument("--probe", action="store_true", help="say which torch this is and whether it has torch.compile")
    ap.add_argument("--seed", type=int, help="build Model after torch.manual_seed(SEED) (KernelBench's construction) "
                    "and compare its state_dict with --weights bit for bit, instead of loading them")
    a = ap.parse_args()
    if a.serve:
        return serve()
    if a.probe:
        say(**probe())
        return 0
    missing = [f for f in ("task", "args", "weights", "inputs", "out") if getattr(a, f) is None]
    if missing:
        ap.error("missing " + ", ".join("--" + f for f in missing))
    say(**answer(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
