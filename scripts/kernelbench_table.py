#!/usr/bin/env python3
"""Published KernelBench-format kernels judged twice: by KernelBench's own
eval contract in plain PyTorch (the truth) and by `kloop eval --protocol
kernelbench`, at the same sizes, side by side (docs/kernelbench.md,
"Judged against KernelBench's own contract").

    kernelbench_table.py --release RELEASE.json --kernels DIR --device cpu|cuda \\
        [--upstream KERNELBENCH_CHECKOUT] [--kloop build/bin/kloop] [--jobs 16] \\
        [--out results.jsonl] [--markdown table.md] [--levels 1,2,3] [--limit N] [--tasks L2/87,L1/9]

RELEASE: a JSON or JSONL release with one record per task carrying its
level, task number, reference code and kernel code, and where it has one a
claimed speedup (deepreinforce-ai/CUDA-L1's optimized_cuda_code/<gpu>.json:
level_id, task_id, ref_code, custom_code, score_default; KernelBench-style
field names level, problem_id, ref_arch_src, kernel_src, speedup also
work). The kernels are written to DIR (keep it out of git: it is the
release's code, not ours), one file per task.

The truth side (this file run as `truth TASK.json`, one process per
kernel) follows KernelBench's eval: set_seed(42) = torch.manual_seed +
torch.cuda.manual_seed; init = get_init_inputs(); set_seed; Model(*init)
on the CPU under no_grad; set_seed; ModelNew(*init) on the CPU; both
.to(device, float32); 5 trials, each with its own seed drawn from
torch.manual_seed(42): set_seed(trial); inputs = get_inputs(); allclose
with atol = rtol = 1e-2 (the kernelbench protocol's tolerance). On the CPU
the reference's module-level sizes are kloop's cpu dims for the task, so
both sides run at the same sizes; on a GPU both run at the release's own
sizes (kloop gets them with --set-dim).

Each task's reference must be kloop's task: its source, without comments,
docstrings and module-level sizes, must equal the file kloop's spec names
in --upstream (the KernelBench snapshot kloop was ported from); a task
whose reference differs (another KernelBench version) is listed and
skipped, never judged against another task.

Both sides run in parallel (--jobs, default the cores: the CUDA extension
builds are CPU work), each result appended to --out as it comes, so a
killed run resumes where it stopped (rows already there are kept).
"""
import argparse
import ast
import concurrent.futures
import hashlib
from itertools import zip_longest
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOLERANCE = 1e-2
TRIALS = 5
SEED = 42

# Where GPU code shows: such a kernel runs only with --device cuda.
GPU_SIGNS = ("load_inline", "__global__", "import triton", "from triton", ".cuda(", "device='cuda",
             'device="cuda', "torch.cuda.Stream", "torch.cuda.graph", "CUDAGraph", "cuda_sources")


# ---- the release -----------------------------------------------------------

def first(record, *names):
    for n in names:
        if n in record and record[n] not in (None, ""):
            return record[n]
    return None


def load_release(path):
    """Records {level, task, ref_code, kernel_code, claimed} from a JSON list,
    a JSON object of levels ({"1": [...]}), or JSONL."""
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
        rows = []
        if isinstance(data, dict):
            for level, items in data.items():
                for item in items:
                    item.setdefault("level_id", int(level) if str(level).isdigit() else level)
                    rows.append(item)
        else:
            rows = list(data)
    except json.JSONDecodeError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for r in rows:
        level = first(r, "level_id", "level")
        task = first(r, "task_id", "problem_id", "task", "problem")
        claimed = first(r, "score_default", "speedup", "claimed_speedup")
        out.append(dict(level=int(level), task=int(task), ref_code=first(r, "ref_code", "ref_arch_src", "reference"),
                        kernel_code=first(r, "custom_code", "kernel_src", "kernel_code", "code"),
                        claimed=float(claimed) if isinstance(claimed, (int, float)) else None))
    return out


# ---- identity of a task ----------------------------------------------------

def module_sizes(tree):
    """Module-level sizes: NAME = <number expression> (of earlier sizes),
    and NAME, NAME = (numbers)."""
    sizes = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        try:
            value = eval(compile(ast.Expression(node.value), "<size>", "eval"), {"__builtins__": {}}, dict(sizes))
        except Exception:
            continue
        if isinstance(target, ast.Name) and isinstance(value, (int, float)) and not isinstance(value, bool):
            sizes[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, tuple) and len(value) == len(target.elts):
            for t, v in zip(target.elts, value):
                if isinstance(t, ast.Name) and isinstance(v, (int, float)) and not isinstance(v, bool):
                    sizes[t.id] = v
    return sizes


def normalized(source):
    """The task's model: its classes and functions other than get_inputs and
    get_init_inputs, without comments and docstrings. Two KernelBench
    versions of one task normalise alike (their sizes and input
    distributions may differ: input_note says how); another task does not."""
    tree = ast.parse(source)

    class Strip(ast.NodeTransformer):
        def generic_visit(self, node):
            super().generic_visit(node)
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                    isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
            return node

    tree = Strip().visit(tree)
    tree.body = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and
                 n.name not in ("get_inputs", "get_init_inputs")]
    return ast.unparse(tree)


def with_sizes(source, dims):
    """The source with its module-level sizes set to `dims` where it names
    them, in place, so that sizes derived from them (bias_shape =
    (out_channels, 1, 1)) follow."""
    tree = ast.parse(source)
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in dims:
            node.value = ast.Constant(dims[target.id])
        elif isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts) and \
                any(t.id in dims for t in target.elts):
            try:
                old = eval(compile(ast.Expression(node.value), "<size>", "eval"), {"__builtins__": {}}, {})
            except Exception:
                continue
            if isinstance(old, tuple) and len(old) == len(target.elts):
                node.value = ast.Tuple([ast.Constant(dims.get(t.id, v)) for t, v in zip(target.elts, old)], ast.Load())
    return ast.unparse(ast.fix_missing_locations(tree))


def inputs_text(source):
    """get_inputs and get_init_inputs as written (docstrings dropped)."""
    tree = ast.parse(source)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs")]
    for n in keep:
        if n.body and isinstance(n.body[0], ast.Expr) and isinstance(getattr(n.body[0], "value", None), ast.Constant):
            n.body = n.body[1:] or [ast.Pass()]
    return "\n".join(ast.unparse(n) for n in keep)


def source_hash(source):
    return hashlib.sha256(normalized(source).encode()).hexdigest()[:16]


def kloop_task(level, task):
    """kloop's spec for level/task: (name, path of its yaml), or None."""
    folder = os.path.join(ROOT, "problems", "kernelbench", "level%d" % level)
    if not os.path.isdir(folder):
        return None
    for f in sorted(os.listdir(folder)):
        if f.endswith(".yaml") and re.match(r"^%d_" % task, f):
            return f[:-5], os.path.join(folder, f)
    return None


def upstream_file(spec_path):
    with open(spec_path) as f:
        for line in f:
            m = re.match(r"\s+file:\s*(\S+)", line)
            if m:
                return m.group(1)
    return None


# ---- the truth: KernelBench's own contract -----------------------------------

def set_seed(torch, seed):
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def exec_source(source, name):
    import types
    module = types.ModuleType(name)
    module.__file__ = name + ".py"
    sys.modules[name] = module
    exec(compile(source, name + ".py", "exec"), module.__dict__)
    return module


def truth(task_file):
    """One kernel under KernelBench's eval contract; its verdict as a dict."""
    import torch
    with open(task_file) as f:
        t = json.load(f)
    device = torch.device(t["device"])
    try:
        ref = exec_source(t["ref_code"], "kb_reference")
    except Exception as e:
        return dict(truth="reference_error", detail="%s: %s" % (type(e).__name__, e))
    try:
        new = exec_source(t["kernel_code"], "kb_candidate")
        ModelNew = new.ModelNew
    except Exception as e:
        return dict(truth="compile_error", detail="%s: %s" % (type(e).__name__, str(e)[:300]))
    try:
        set_seed(torch, SEED)
        init = ref.get_init_inputs()
        with torch.no_grad():
            set_seed(torch, SEED)
            model = ref.Model(*init)
            set_seed(torch, SEED)
            custom = ModelNew(*init)
            model = model.to(device=device, dtype=torch.float32)
            custom = custom.to(device=device, dtype=torch.float32)
    except Exception as e:
        return dict(truth="runtime_error", detail="constructing: %s: %s" % (type(e).__name__, str(e)[:300]))
    torch.manual_seed(SEED)
    seeds = [torch.randint(0, 2 ** 32 - 1, (1,)).item() for _ in range(TRIALS)]
    worst = 0.0
    with torch.no_grad():
        for s in seeds:
            set_seed(torch, s)
            inputs = [x.to(device=device, dtype=torch.float32) if isinstance(x, torch.Tensor) and
                      x.is_floating_point() else (x.to(device) if isinstance(x, torch.Tensor) else x)
                      for x in ref.get_inputs()]
            expected = model(*inputs)
            try:
                got = custom(*inputs)
                if device.type == "cuda":
                    torch.cuda.synchronize()
            except Exception as e:
                return dict(truth="runtime_error", detail="%s: %s" % (type(e).__name__, str(e)[:300]))
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                return dict(truth="incorrect", detail="output shape %s, expected %s" % (
                    tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__, tuple(expected.shape)))
            diff = (got.float() - expected.float()).abs().max().item() if got.numel() else 0.0
            worst = max(worst, diff)
            if not torch.allclose(expected, got, atol=TOLERANCE, rtol=TOLERANCE):
                return dict(truth="incorrect", detail="output mismatch (max abs difference %.3g)" % diff,
                            max_abs_difference=diff)
    return dict(truth="correct", max_abs_difference=worst)


# ---- kloop -----------------------------------------------------------------

def kloop_eval(kloop, name, kernel_path, device, set_dims, timeout):
    cmd = [kloop, "eval", "--problem", name, "--candidate", kernel_path, "--candidate-format", "kernelbench_python",
           "--protocol", "kernelbench", "--device", device, "--no-timing", "--json"]
    for k, v in set_dims.items():
        cmd += ["--set-dim", "%s=%s" % (k, v)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(kloop="error", kloop_detail="kloop eval ran past %d s" % timeout)
    try:
        v = json.loads(r.stdout)
    except json.JSONDecodeError:
        lines = (r.stderr or r.stdout).strip().splitlines()
        return dict(kloop="error", kloop_detail=lines[-1][:300] if lines else "no output")
    checks = [i.get("check") for i in v.get("integrity", [])]
    return dict(kloop=v.get("verdict"), kloop_detail=v.get("message", "")[:300], kloop_checks=checks,
                kloop_construction=v.get("construction"), kloop_not_applied=v.get("checks_not_applied", []),
                kloop_runtime_builds=v.get("runtime_builds", []))


def kloop_dims(kloop, name, device):
    """The dims kloop runs the task at on this device: its cpu dims on the CPU."""
    r = subprocess.run([kloop, "problems", "show", name, "--json"], capture_output=True, text=True)
    spec = json.loads(r.stdout)
    dims = dict(spec.get("dims", {}))
    if device == "cpu":
        dims = dict(spec.get("cpu_dims", dims))
    return dims


# ---- one task, both sides ----------------------------------------------------

def judge_task(rec, args):
    key = "L%d/%d" % (rec["level"], rec["task"])
    row = dict(key=key, level=rec["level"], task=rec["task"], claimed=rec["claimed"])
    found = kloop_task(rec["level"], rec["task"])
    if not found:
        return dict(row, status="skipped", why="kloop has no task %s" % key)
    name, spec_path = found
    row["problem"] = name
    if not rec["kernel_code"]:
        return dict(row, status="missing", why="the release has no kernel for this task (a failure)")
    reference = rec["ref_code"]
    if args.upstream:
        rel = upstream_file(spec_path)
        path = os.path.join(args.upstream, rel) if rel else None
        if not path or not os.path.isfile(path):
            return dict(row, status="skipped", why="kloop's upstream file %s is not in --upstream" % rel)
        with open(path) as f:
            theirs = f.read()
        try:
            same = normalized(theirs) == normalized(rec["ref_code"])
        except SyntaxError as e:
            same = False
        row["reference_hash"] = source_hash(rec["ref_code"])
        if same and inputs_text(theirs) != inputs_text(rec["ref_code"]):
            row["input_note"] = "get_inputs differs from kloop's upstream file (another KernelBench version)"
        if not same:
            return dict(row, status="skipped", why="the release's reference differs from %s (another KernelBench "
                        "version): not kloop's task %s" % (rel, name))
        # The same Model: the truth runs kloop's upstream file (its input
        # distributions are the ones kloop's spec draws), at the sizes below.
        reference = theirs
    gpu_code = any(s in rec["kernel_code"] for s in GPU_SIGNS)
    if args.device == "cpu" and gpu_code:
        return dict(row, status="gpu_only", why="GPU code (runs with --device cuda)")
    if args.gpu_code_only and not gpu_code:
        return dict(row, status="cpu_code", why="no GPU code (judged on the CPU: PUBLISHED-CPU.md)")
    os.makedirs(args.kernels, exist_ok=True)
    kernel_path = os.path.abspath(os.path.join(args.kernels, "level%d_%s.py" % (rec["level"], name)))
    with open(kernel_path, "w") as f:
        f.write(rec["kernel_code"])
    sizes = module_sizes(ast.parse(rec["ref_code"]))
    kdims = kloop_dims(args.kloop, name, args.device)
    if args.device == "cpu":
        dims, set_dims = kdims, {}  # both at kloop's cpu dims
    else:
        # The release's own sizes; kloop at the same ones where it names them alike.
        set_dims = {k: v for k, v in sizes.items() if k in kdims and isinstance(v, int) and v != kdims[k]}
        dims = dict(kdims, **set_dims)
    task_file = kernel_path[:-3] + ".task.json"
    with open(task_file, "w") as f:
        json.dump(dict(ref_code=with_sizes(reference, dims), kernel_code=rec["kernel_code"], device=args.device), f)
    t0 = time.time()
    try:
        # Its own extensions folder, as KernelBench gives each kernel its own build folder:
        # kernels that name their extension alike must not share (or load) one build.
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=kernel_path[:-3] + ".extensions")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "truth", task_file], capture_output=True,
                           text=True, timeout=args.timeout, cwd=args.kernels, env=env)
        lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
        got = json.loads(lines[-1]) if lines else dict(truth="runtime_error",
                                                       detail=(r.stderr.strip().splitlines() or ["died"])[-1][:300])
    except subprocess.TimeoutExpired:
        got = dict(truth="timeout", detail="past %d s" % args.timeout)
    row.update(got)
    row.update(kloop_eval(args.kloop, name, kernel_path, args.device, set_dims, args.timeout))
    row["seconds"] = round(time.time() - t0, 1)
    row["status"] = "judged"
    row["agree"] = (row.get("truth") == "correct") == (row.get("kloop") == "correct")
    return row


def markdown(rows, release, device):
    rows = sorted(rows, key=lambda r: (r["level"], r["task"]))
    judged = [r for r in rows if r.get("status") == "judged"]
    lines = ["# Published kernels: KernelBench's contract vs kloop", "",
             "Release: `%s`; device: %s; kloop side: `kloop eval --protocol kernelbench` (construction: seeded)." % (
                 os.path.basename(release), device), "",
             "%d tasks, %d judged on both sides, %d agree; %d skipped (reference differs or no kloop task), "
             "%d GPU-only here, %d without GPU code (judged on the CPU), %d missing in the release." % (
                 len(rows), len(judged), sum(1 for r in judged if r["agree"]),
                 sum(1 for r in rows if r.get("status") == "skipped"),
                 sum(1 for r in rows if r.get("status") == "gpu_only"),
                 sum(1 for r in rows if r.get("status") == "cpu_code"),
                 sum(1 for r in rows if r.get("status") == "missing")), "",
             "| level | task | claimed speedup | KernelBench's contract | kloop | agree | kloop's message / why not judged |",
             "|--:|---|--:|---|---|---|---|"]
    for r in rows:
        claimed = "%.3g" % r["claimed"] if r.get("claimed") is not None else "n/a"
        what = r.get("kloop_detail", "") if r.get("status") == "judged" else r.get("why", "")
        if r.get("kloop_runtime_builds"):  # what kloop ran did without these (its verdict says so)
            what = "%s; not built (asked for in ModelNew): %s" % (what, ", ".join(r["kloop_runtime_builds"]))
        what = str(what or "").replace("|", "/").replace("\n", " ")[:200]
        lines.append("| %d | %s | %s | %s | %s | %s | %s |" % (
            r["level"], r.get("problem", r["task"]), claimed, r.get("truth", "-"), r.get("kloop", "-"),
            ("yes" if r["agree"] else "**no**") if "agree" in r else "-", what))
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "truth":
        try:
            print(json.dumps(truth(sys.argv[2])), flush=True)
        except Exception as e:
            print(json.dumps(dict(truth="runtime_error", detail="%s: %s" % (type(e).__name__, str(e)[:300]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--release", required=True)
    ap.add_argument("--kernels", required=True, help="folder for the kernels (git-ignored)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--upstream", help="the KernelBench checkout kloop's ports come from")
    ap.add_argument("--kloop", default=os.path.join(ROOT, "build", "bin", "kloop"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--timeout", type=int, default=900, help="seconds per side per task")
    ap.add_argument("--out", default="kernelbench-table.jsonl")
    ap.add_argument("--markdown")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--gpu-code-only", action="store_true",
                    help="judge only kernels with GPU code (those without run on the CPU too: judge them there)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many tasks judged (0: all)")
    ap.add_argument("--tasks", default="", help="only these tasks, e.g. L2/87,L1/9 (default: all)")
    args = ap.parse_args()
    levels = {int(x) for x in args.levels.split(",")}
    records = [r for r in load_release(args.release) if r["level"] in levels]
    if args.tasks:
        wanted = {t.strip() for t in args.tasks.split(",") if t.strip()}
        bad = [t for t in wanted if not re.fullmatch(r"L[123]/\d+", t)]
        if bad:
            sys.exit("kernelbench_table: --tasks: %s is not LEVEL/TASK, e.g. L2/87" % ", ".join(sorted(bad)))
        records = [r for r in records if "L%d/%d" % (r["level"], r["task"]) in wanted]
    done = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    done[row["key"]] = row
    todo = [r for r in records if "L%d/%d" % (r["level"], r["task"]) not in done]
    # The levels taken in turn, so a run cut short (or --limit) covers all three.
    by_level = {}
    for r in todo:
        by_level.setdefault(r["level"], []).append(r)
    todo = [r for group in zip_longest(*(by_level[k] for k in sorted(by_level))) for r in group if r]
    if args.limit:
        todo = todo[:args.limit]
    print("kernelbench_table: %d task(s) in the release, %d done earlier, %d to judge with %d job(s)" % (
        len(records), len(done), len(todo), args.jobs), flush=True)
    with open(args.out, "a") as out, concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(judge_task, r, args): r for r in todo}
        for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            try:
                row = fut.result()
            except Exception as e:
                r = futures[fut]
                row = dict(key="L%d/%d" % (r["level"], r["task"]), level=r["level"], task=r["task"],
                           claimed=r["claimed"], status="error", why="%s: %s" % (type(e).__name__, e))
            done[row["key"]] = row
            out.write(json.dumps(row) + "\n")
            out.flush()
            if args.markdown:  # after every row: a run cut short still leaves its table
                with open(args.markdown, "w") as f:
                    f.write(markdown(list(done.values()), args.release, args.device))
            print("[%d/%d] %s %s: truth %s, kloop %s %s" % (n, len(todo), row["key"], row.get("problem", ""),
                                                           row.get("truth", "-"), row.get("kloop", "-"),
                                                           row.get("why", "")), flush=True)
    rows = [done[k] for k in done]
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, args.release, args.device))
    disagree = [r for r in rows if r.get("status") == "judged" and not r["agree"]]
    print("kernelbench_table: %d judged, %d disagree" % (sum(1 for r in rows if r.get("status") == "judged"),
                                                         len(disagree)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
