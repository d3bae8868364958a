"""Digests of the CUDA C of every kernel the CUDA tests render, to show that a change leaves the
generated CUDA C byte-identical. Run it on two trees and diff the output:

    PYTHONPATH=/work/main python <this file> /tmp/main.txt   [test files...]
    PYTHONPATH=$PWD       python <this file> /tmp/branch.txt [test files...]
    diff /tmp/main.txt /tmp/branch.txt     # the sources themselves are in /tmp/*.txt.d/

The tests run (with pytest, in the tree that PYTHONPATH names) with this file as a plugin that
records each `render_cuda` result; the output holds one "sha256 kernel-name" line per distinct source.
The default test files render about 170 distinct kernels and take about 35 minutes on a shared
2-core machine (the emulation engines run every kernel); name a few test files for a quick check.
"""
import hashlib, os, subprocess, sys

DEFAULT_TESTS = """
tests/target/cuda tests/target/simt tests/topi tests/tvm_ports/test_reduction_cuda.py
tests/target/test_ieee_signs.py tests/target/test_intrinsic_table.py tests/target/test_reducers.py
tests/target/test_registry.py tests/target/test_target.py tests/dtypes/test_bfloat16.py
tests/lowering/test_index_wrap.py tests/api/test_trace.py tests/api/test_lower_build.py
tests/api/test_build.py tests/schedule/test_errors.py tests/schedule/test_steps.py tests/test_cli.py
tests/torch/test_schedules.py tests/torch/test_cuda_emulate.py tests/torch/test_model_patterns.py
""".split()


def pytest_configure(config):
    """Plugin hook: wrap render_cuda so that every source it returns is recorded."""
    import schedlang.target.cuda.codegen as codegen
    original, out = codegen.render_cuda, os.environ["CUDA_SOURCE_DUMP"]
    os.makedirs(out + ".d", exist_ok=True)

    def render_cuda(module):
        text = original(module)
        digest = hashlib.sha256(text.encode()).hexdigest()
        with open(out + ".raw", "a") as f:
            f.write(f"{digest} {module.name}\n")
        with open(os.path.join(out + ".d", digest[:16] + ".cu"), "w") as f:
            f.write(text)
        return text
    codegen.render_cuda = render_cuda


def main(out, tests):
    """Run the tests in the tree schedlang is imported from; write the sorted distinct digests."""
    import schedlang
    root = os.path.dirname(os.path.dirname(os.path.abspath(schedlang.__file__)))
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(out + ".raw"):
        os.remove(out + ".raw")
    env = dict(os.environ, CUDA_SOURCE_DUMP=os.path.abspath(out),
               PYTHONPATH=os.pathsep.join([root, here]))
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "cuda_source_digest", *tests], cwd=root, env=env)
    with open(out + ".raw") as f:
        lines = sorted(set(f))
    with open(out, "w") as f:
        f.writelines(lines)
    print(f"{len(lines)} distinct CUDA sources (tests rc {rc}) -> {out}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:] or DEFAULT_TESTS))
