#!/usr/bin/env python3
"""Runs one upstream (KernelBench-format) task on kloop's weights and inputs.

`kloop problems parity` calls it once per task, with the machine's python3
and torch:

    upstream_parity.py --task UPSTREAM.py --args ARGS.json --weights W.kt
                       --inputs I.kt --out O.kt [--dims DIMS.json] [--device cpu|cuda]

The task file defines `Model` (a torch.nn.Module), `get_inputs` and
`get_init_inputs`. The model is built from kloop's constructor arguments by
parameter name (a parameter kloop does not list keeps its default), its
state_dict is replaced by kloop's weights (same names and shapes, or the
task is a key mismatch), and forward runs on kloop's inputs. The outputs go
to O.kt in kloop's tensor file format; one JSON line on stdout says what
happened.
"""
import argparse
import importlib.util
import inspect
import json
import struct
import sys

import torch

MAGIC = b"KLOOPTNS"
VERSION = 1
# evaluator/runtime/dtype.h, in its order.
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool]


def read_tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(path + ": not a kloop tensor file")
    version, count = struct.unpack_from("<II", data, 8)
    if version != VERSION:
        raise ValueError(path + ": tensor file version %d, expected %d" % (version, VERSION))
    at = 16
    out = []
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", data, at)
        at += 4
        name = data[at:at + name_len].decode()
        at += name_len
        dtype, ndim = struct.unpack_from("<II", data, at)
        at += 8
        shape = list(struct.unpack_from("<%dq" % ndim, data, at))
        at += 8 * ndim
        (nbytes,) = struct.unpack_from("<Q", data, at)
        at += 8
        raw = bytearray(data[at:at + nbytes])
        at += nbytes
        t = torch.frombuffer(raw, dtype=DTYPES[dtype]) if nbytes else torch.empty(0, dtype=DTYPES[dtype])
        out.append((name, t.reshape(shape).clone()))
    return out


def write_tensors(path, tensors):
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", VERSION, len(tensors)))
        for name, t in tensors:
            t = t.detach().to("cpu").contiguous()
            raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            encoded = name.encode()
            f.write(struct.pack("<I", len(encoded)))
            f.write(encoded)
            f.write(struct.pack("<II", DTYPES.index(t.dtype), t.dim()))
            f.write(struct.pack("<%dq" % t.dim(), *t.shape))
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)


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
