"""extension_build.py's changes to torch's build.ninja, run through torch's
own ninja step (torch.utils.cpp_extension._run_ninja_build) and real ninja.
The CUDA compiler is a stand-in shell rule (there is no nvcc in CI): it
fails on a source in which torch/extension.h reads torch/types.h when the
source needs more, as nvcc would, and records which file it compiled.

    python3 -I extension_build_test.py      (ctest: ExtensionBuildTest)
"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extension_build  # noqa: E402

NINJA = """ninja_required_version = 1.3
cxx = c++
nvcc = {nvcc}

cflags = -DTORCH_EXTENSION_NAME=ext -DTORCH_API_INCLUDE_EXTENSION_H -isystem /torch/include -fPIC -std=c++17{extra}
post_cflags =
cuda_cflags = -DTORCH_EXTENSION_NAME=ext --expt-relaxed-constexpr
cuda_post_cflags =
ldflags = -shared

rule compile
  command = echo "$cflags" > $out

rule cuda_compile
  command = $nvcc $in $out

rule link
  command = cat $in > $out

build main.o: compile {dir}/main.cpp
build cuda.cuda.o: cuda_compile {dir}/cuda.cu

build ext.so: link main.o cuda.cuda.o

default ext.so
"""

# Compiles (records its input) unless the source reads torch/types.h where
# it wrote torch/extension.h and says it needs the whole header.
NVCC = """#!/bin/sh
if grep -q 'needs-whole-header' "$1" && ! grep -q 'torch/extension.h' "$1"; then
  echo "$1: error: 'thing' is not a member of 'torch'" >&2; exit 1
fi
echo "$1" > "$2"
"""


class ExtensionBuildTest(unittest.TestCase):
    def setUp(self):
        import torch.utils.cpp_extension as cpp
        self.cpp = cpp
        self.real = cpp._run_ninja_build
        self.dir = tempfile.mkdtemp(prefix="kloop-extension-build-")
        self.nvcc = os.path.join(self.dir, "fake-nvcc")
        with open(self.nvcc, "w") as f:
            f.write(NVCC)
        os.chmod(self.nvcc, 0o755)
        with open(os.path.join(self.dir, "main.cpp"), "w") as f:
            f.write("#include <torch/extension.h>\n")
        self.pch = os.path.join(self.dir, "pch")
        os.makedirs(self.pch)
        open(os.path.join(self.pch, extension_build.PCH_HEADER + ".gch"), "w").close()
        with open(os.path.join(self.pch, "manifest.json"), "w") as f:
            f.write('{"cxx": "c++", "cflags": ["-DTORCH_API_INCLUDE_EXTENSION_H", "-isystem", "/torch/include", '
                    '"-fPIC", "-std=c++17"], "header": "%s"}' % extension_build.PCH_HEADER)

    def tearDown(self):
        self.cpp._run_ninja_build = self.real
        shutil.rmtree(self.dir, ignore_errors=True)

    def build(self, cuda_source, extra_cflags="", pch=True):
        for name in ("main.o", "cuda.cuda.o", "ext.so", ".ninja_log", ".ninja_deps"):
            if os.path.exists(os.path.join(self.dir, name)):
                os.remove(os.path.join(self.dir, name))
        with open(os.path.join(self.dir, "cuda.cu"), "w") as f:
            f.write(cuda_source)
        with open(os.path.join(self.dir, "build.ninja"), "w") as f:
            f.write(NINJA.format(nvcc=self.nvcc, dir=self.dir, extra=extra_cflags))
        self.cpp._run_ninja_build = self.real
        extension_build.install(self.cpp, self.pch if pch else "")
        self.cpp._run_ninja_build(self.dir, False, "Error building extension 'ext'")
        with open(os.path.join(self.dir, "cuda.cuda.o")) as f:
            cuda_input = f.read().strip()
        with open(os.path.join(self.dir, "main.o")) as f:
            main_flags = f.read()
        return cuda_input, main_flags

    def test_a_cu_that_uses_only_types_h_compiles_from_the_light_copy(self):
        cuda_input, _ = self.build("#include <torch/types.h>\n#include <torch/extension.h>\n__global__ void k() {}\n")
        self.assertTrue(cuda_input.endswith("kloop-light/cuda.cu"), cuda_input)
        with open(cuda_input) as f:
            light = f.read()
        self.assertNotIn("torch/extension.h", light)
        self.assertEqual(light.count("\n"), 3, "lines keep their numbers")

    def test_a_cu_the_light_copy_cannot_build_is_built_as_written(self):
        cuda_input, _ = self.build("#include <torch/extension.h>\n// needs-whole-header\n")
        self.assertEqual(cuda_input, os.path.join(self.dir, "cuda.cu"))

    def test_what_needs_the_whole_header_is_never_substituted(self):
        for use in ("py::object o;", "PYBIND11_MODULE(x, m) {}", "torch::nn::Linear l(1, 1);",
                    "#include <torch/python.h>", "torch::autograd::Function<F> f;"):
            cuda_input, _ = self.build("#include <torch/extension.h>\n" + use + "\n")
            self.assertEqual(cuda_input, os.path.join(self.dir, "cuda.cu"), use)

    def test_main_cpp_takes_the_precompiled_header_only_with_its_exact_flags(self):
        _, flags = self.build("#include <torch/types.h>\n")
        self.assertIn("-include %s -Winvalid-pch" % os.path.join(self.pch, extension_build.PCH_HEADER), flags)
        _, flags = self.build("#include <torch/types.h>\n", extra_cflags=" -O3")
        self.assertNotIn("-include", flags)
        _, flags = self.build("#include <torch/types.h>\n", pch=False)
        self.assertNotIn("-include", flags)


if __name__ == "__main__":
    unittest.main()
