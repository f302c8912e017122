"""How kloop runs torch's load_inline/load builds faster without changing
what they build (docs/kernelbench.md, "Its build").

Torch writes an extension's build.ninja (main.cpp: torch/extension.h, the
candidate's cpp_sources and the pybind11 bindings; cuda.cu: torch/types.h
and the candidate's cuda_sources) and runs ninja, which compiles the two
translation units side by side and links them. kloop keeps all of that and
changes two things in build.ninja before ninja runs:

* main.cpp: when kloop has precompiled torch/extension.h with exactly the
  flags torch gives this main.cpp (other than -DTORCH_EXTENSION_NAME, which
  the header does not use), the compile includes that precompiled header
  first (-include, -Winvalid-pch). GCC then reads the header's state
  instead of parsing it; the object file is byte for byte the one built
  without it. The header is made by kloop outside the sandbox (make_pch,
  run by evaluator/build/builder.cpp), signed in kloop's build cache and
  mounted read-only here; KLOOP_EXTENSION_PCH names its folder.
* a .cu source that includes torch/extension.h but uses nothing of it
  beyond torch/types.h (which torch puts at the top of every load_inline
  .cu anyway): it compiles from a copy in which those includes read
  torch/types.h, so nvcc's three passes (cudafe++, cicc, the host
  compiler) skip torch's C++ frontend (torch/all.h) and its Python
  bindings (torch/python.h), about half of the .cu's compile time. Lines
  keep their numbers. If the copy does not compile, the build runs again
  from the sources as written, so the substitution can only change the
  time a build takes, never whether it compiles.

Both are skipped, and the build is torch's own, when torch's internals are
not what this file expects.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time

PCH_HEADER = "kloop_extension_pch.h"
EXTENSION_NAME_FLAG = "-DTORCH_EXTENSION_NAME="
# What a .cu may use only with the whole torch/extension.h: pybind11 and the
# Python API, the C++ frontend's modules, optimisers, data, serialisation,
# autograd functions, TorchScript.
_NEEDS_WHOLE_EXTENSION_H = re.compile(
    r"pybind11|PYBIND11|\bpy::|Python\.h|torch/python\.h|\bTHP|torch::(nn|optim|data|serialize|jit|autograd|python)\b"
    r"|torch/(all|torch|nn|optim|data|serialize|jit|script|autograd)\.h|torch/csrc/")
_EXTENSION_H_INCLUDE = re.compile(r'^([ \t]*#[ \t]*include[ \t]*)[<"]torch/extension\.h[>"]', re.M)


def log(message):
    print("kloop: " + message, flush=True)


def _ninja_value(text, variable):
    m = re.search(r"^%s = (.*)$" % re.escape(variable), text, re.M)
    return m.group(1) if m else None


def _pch_flags(cflags):
    """The flags a main.cpp compile shares with its precompiled header."""
    return [f for f in cflags if f and not f.startswith(EXTENSION_NAME_FLAG)]


# ---- the precompiled torch/extension.h (made by kloop, outside the sandbox) ---

class _Captured(Exception):
    pass


def _main_cpp_flags(cpp, with_cuda, build_directory):
    """The compiler and the flags torch's build.ninja gives the main.cpp of
    a load_inline extension without extra flags, read from the build.ninja
    torch writes (ninja is not run)."""
    real = cpp._run_ninja_build
    seen = {}

    def capture(build_directory, verbose, error_prefix):
        with open(os.path.join(build_directory, "build.ninja")) as f:
            seen["ninja"] = f.read()
        raise _Captured()

    cpp._run_ninja_build = capture
    try:
        cpp.load_inline(name="kloop_pch_probe", cpp_sources="", cuda_sources="" if not with_cuda else "//",
                        with_cuda=with_cuda, build_directory=build_directory, verbose=False)
    except _Captured:
        pass
    finally:
        cpp._run_ninja_build = real
    text = seen.get("ninja")
    if text is None:
        raise RuntimeError("torch's load_inline ran no ninja build")
    return _ninja_value(text, "cxx"), shlex.split(_ninja_value(text, "cflags") or "")


def make_pch(out, target):
    """Precompiles torch/extension.h into OUT with the flags torch gives an
    extension's main.cpp on TARGET (cuda: with CUDA's include folder) and
    writes OUT/manifest.json: the compiler and those flags. Proves the
    header usable (a compile that includes it with -Winvalid-pch -Werror)
    before it is recorded."""
    import torch.utils.cpp_extension as cpp
    os.makedirs(out, exist_ok=True)
    probe_dir = os.path.join(out, "probe")
    os.makedirs(probe_dir, exist_ok=True)
    cxx, cflags = _main_cpp_flags(cpp, target == "cuda", probe_dir)
    if not cxx or not cflags:
        raise RuntimeError("torch's build.ninja names no compiler or flags")
    flags = _pch_flags(cflags)
    header = os.path.join(out, PCH_HEADER)
    with open(header, "w") as f:
        f.write("#include <torch/extension.h>\n")
    start = time.monotonic()
    subprocess.run(shlex.split(cxx) + flags + ["-x", "c++-header", header, "-o", header + ".gch"], check=True)
    seconds = time.monotonic() - start
    probe = os.path.join(probe_dir, "probe.cpp")
    with open(probe, "w") as f:
        f.write("#include <torch/extension.h>\n")
    subprocess.run(shlex.split(cxx) + [EXTENSION_NAME_FLAG + "kloop_pch_probe"] + flags +
                   ["-include", header, "-Winvalid-pch", "-Werror", "-fsyntax-only", probe], check=True)
    for name in os.listdir(probe_dir):
        os.remove(os.path.join(probe_dir, name))
    os.rmdir(probe_dir)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"cxx": cxx, "cflags": flags, "header": PCH_HEADER, "seconds": round(seconds, 3)}, f)
    log("torch/extension.h precompiled for %s in %.1f s" % (target, seconds))


def _read_pch(folder):
    if not folder:
        return None
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            m = json.load(f)
        m["path"] = os.path.join(folder, m["header"])
        return m if os.path.isfile(m["path"] + ".gch") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ---- in the sandboxed build --------------------------------------------------

def _light_cuda_source(path):
    """The text of `path` with its torch/extension.h includes reading
    torch/types.h, or None when it has none or uses what only the whole
    header declares."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    if not _EXTENSION_H_INCLUDE.search(text) or _NEEDS_WHOLE_EXTENSION_H.search(_EXTENSION_H_INCLUDE.sub("", text)):
        return None
    return _EXTENSION_H_INCLUDE.sub(r"\1<torch/types.h>", text)


def _edit(ninja, pch):
    """build.ninja with kloop's changes: (with the precompiled header only,
    with both, what each change was, the objects built from a light copy)."""
    notes = []
    cflags = _ninja_value(ninja, "cflags")
    if cflags is not None:
        if pch is None:
            notes.append("main.cpp without a precompiled header (%s)" % (
                os.environ.get("KLOOP_EXTENSION_PCH_NOTE") or "kloop has none here"))
        elif _ninja_value(ninja, "cxx") != pch["cxx"] or _pch_flags(shlex.split(cflags)) != pch["cflags"]:
            extra = [f for f in _pch_flags(shlex.split(cflags)) if f not in pch["cflags"]]
            notes.append("main.cpp without a precompiled header (kloop's is for load_inline's own flags; "
                         "this build adds %s)" % (" ".join(extra) or "other flags"))
        else:
            ninja = ninja.replace("cflags = " + cflags, "cflags = %s -include %s -Winvalid-pch" % (
                cflags, shlex.quote(pch["path"])), 1)
            notes.append("main.cpp with kloop's precompiled torch/extension.h")
    with_pch = ninja
    light_objects = []
    light = os.environ.get("KLOOP_LIGHT_CUDA_HEADERS", "1") != "0"
    for m in re.finditer(r"^build (\S+): cuda_compile (\S+)$", with_pch, re.M):
        source = m.group(2).replace("$ ", " ")
        text = _light_cuda_source(source) if light else None
        if text is None:
            notes.append("%s as written%s" % (os.path.basename(source), "" if light else " (KLOOP_LIGHT_CUDA_HEADERS=0)"))
            continue
        folder = os.path.join(os.path.dirname(source), "kloop-light")
        os.makedirs(folder, exist_ok=True)
        copy = os.path.join(folder, os.path.basename(source))
        with open(copy, "w") as f:
            f.write(text)
        ninja = ninja.replace(m.group(0), "build %s: cuda_compile %s" % (m.group(1), copy.replace(" ", "$ ")), 1)
        light_objects.append(m.group(1))
        notes.append("%s with torch/types.h for torch/extension.h (it uses nothing else of it)"
                     % os.path.basename(source))
    return with_pch, ninja, notes, light_objects


def _ninja_steps(build_directory):
    """`target seconds` for each step of the last ninja run (.ninja_log)."""
    steps = []
    try:
        with open(os.path.join(build_directory, ".ninja_log")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 4 and parts[0].isdigit() and parts[1].isdigit():
                    steps.append((parts[3], (int(parts[1]) - int(parts[0])) / 1000.0))
    except OSError:
        pass
    return steps


def install(cpp, pch_folder):
    """Wraps torch's ninja step (cpp._run_ninja_build) with kloop's changes."""
    real = getattr(cpp, "_run_ninja_build", None)
    if real is None:
        log("torch.utils.cpp_extension has no _run_ninja_build: extensions build as torch builds them")
        return
    pch = _read_pch(pch_folder)
    made = os.environ.get("KLOOP_EXTENSION_PCH_MADE")
    if pch and made:
        log("torch/extension.h precompiled by kloop before this build, in %.1f s (once per python, torch, compiler "
            "and target)" % float(made))

    def run_ninja(build_directory, verbose, error_prefix):
        path = os.path.join(build_directory, "build.ninja")
        with open(path) as f:
            original = f.read()
        with_pch, edited, notes, light_objects = _edit(original, pch)
        done = len(_ninja_steps(build_directory))
        start = time.monotonic()
        with open(path, "w") as f:
            f.write(edited)
        try:
            real(build_directory, verbose, error_prefix)
        except Exception as e:
            # (verbose=True sends ninja's output to the log, not into e)
            failed = [o for o in light_objects
                      if "FAILED: " + o in str(e) or not os.path.exists(os.path.join(build_directory, o))]
            if not failed:
                raise
            # The light copy did not compile: the sources as written decide.
            log("%s: %s did not compile with torch/types.h for torch/extension.h; building it as written"
                % (os.path.basename(build_directory), ", ".join(failed)))
            with open(path, "w") as f:
                f.write(with_pch)
            notes = [n for n in notes if "torch/types.h" not in n] + ["the .cu sources as written"]
            done = len(_ninja_steps(build_directory))
            real(build_directory, verbose, error_prefix)
        wall = time.monotonic() - start
        steps = ", ".join("%s %.1f s" % s for s in _ninja_steps(build_directory)[done:])
        log("%s: %s; ninja %.1f s (%s)" % (os.path.basename(build_directory), "; ".join(notes), wall, steps))

    cpp._run_ninja_build = run_ninja
