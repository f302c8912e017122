#!/usr/bin/env python3
"""Runs one upstream (KernelBench-format) task on kloop's weights and inputs.

`kloop problems parity` calls it once per task, with the machine's python3
and torch:

    upstream_parity.py --task UPSTREAM.py --args ARGS.json --weights W.safetensors
                       --inputs I.safetensors --out O.safetensors [--dims DIMS.json] [--device cpu|cuda]

The task file defines `Model` (a torch.nn.Module), `get_inputs` and
`get_init_inputs`. The model is built from kloop's constructor arguments by
parameter name (a parameter kloop does not list keeps its default), its
state_dict is replaced by kloop's weights (same names and shapes, or the
task is a key mismatch), and forward runs on kloop's inputs. The outputs go
to O.safetensors (kloop's tensor files are safetensors); one JSON line on stdout says what
happened.
"""
import argparse
import importlib.util
import inspect
import json
import mmap
import os
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


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--task", "--args", "--weights", "--inputs", "--out"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dims", help="kloop's dims (JSON): module-level globals of the same names take these values")
    a = ap.parse_args()
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
        say(ok=False, kind="arg_mismatch", error="constructor parameter(s) %s are not among kloop's args %s"
            % (missing_args, sorted(kloop_args)))
        return 0
    model = module.Model(**kwargs)

    weights = dict(read_tensors(a.weights))
    state = model.state_dict()
    upstream_only = sorted(k for k in state if k not in weights)
    kloop_only = sorted(k for k in weights if k not in state)
    shapes = sorted("%s: upstream %s, kloop %s" % (k, list(state[k].shape), list(weights[k].shape))
                    for k in state if k in weights and tuple(state[k].shape) != tuple(weights[k].shape))
    if upstream_only or kloop_only or shapes:
        say(ok=False, kind="key_mismatch", upstream_only=upstream_only, kloop_only=kloop_only, shapes=shapes)
        return 0
    model.load_state_dict({k: weights[k].to(state[k].dtype) for k in state})
    # In the mode a new module has (training), as KernelBench runs it and as
    # kloop's references run: batch norm on the batch's statistics.
    model = model.to(a.device)

    inputs = [t.to(a.device) for _, t in read_tensors(a.inputs)]
    with torch.no_grad():
        out = model(*inputs)
    if not isinstance(out, (tuple, list)):
        out = [out]
    outs = []
    for i, t in enumerate(out):
        if not torch.is_tensor(t):
            t = torch.tensor(t)
        outs.append(("output%d" % i, t))
    write_tensors(a.out, outs)
    say(ok=True, outputs=len(outs), state_dict_keys=len(state))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the task file's own failure: a result, not a crash of the harness
        say(ok=False, kind="error", error="%s: %s" % (type(e).__name__, e))
        sys.exit(0)
