"""Shared test options: --update-golden rewrites the golden IR files instead of comparing;
--host-lacks runs the suite as if the host CPU lacked some features (an AVX2-only machine);
`-n auto` (pytest-xdist) starts at most 8 workers."""
import os

import llvmlite.binding as llvm
import pytest
from hypothesis import HealthCheck, settings

# Verify the IR after every lowering pass in every test (schedlang/verify.py reads this at import).
os.environ.setdefault("SCHEDLANG_VERIFY", "1")
# The on-disk kernel cache is off for the suite (a warm cache would turn builds that tests
# count or trace into loads); tests/api/test_kernel_cache.py turns it on in folders of its own.
os.environ.setdefault("SCHEDLANG_KERNEL_CACHE", "0")
import schedlang.verify  # noqa: E402
from schedlang.target.llvm.jit import host_cpu  # noqa: E402

schedlang.verify.ENABLED = os.environ["SCHEDLANG_VERIFY"] != "0"

# Property tests build and run code: on a loaded machine (parallel workers, CI neighbours) an
# example may take seconds. Neither a deadline nor the too-slow health check measures the
# property; each test keeps its own example count.
settings.register_profile("schedlang", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("schedlang")


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.txt from the current printers")
    parser.addoption("--host-lacks", default="", metavar="PREFIXES",
                     help="run as if the host CPU lacked every feature whose name starts with one of "
                          "these comma-separated prefixes; 'avx512,avxvnni,gfni' is a Zen 3 (AVX2 only)")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pytest-xdist): a worker per core this process may run on, at most 8. Each
    worker holds torch and LLVM, and some tests start processes of their own."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cores))


def pytest_configure(config):
    prefixes = tuple(p for p in config.getoption("--host-lacks").split(",") if p)
    if prefixes:
        _pretend_host_lacks(prefixes)


def _pretend_host_lacks(prefixes) -> None:
    """Switch features off in what LLVM reports for the host, so "llvm" resolves to that
    smaller machine in this process (the JIT then emits only what it has, which the real host
    runs). Processes the tests start (auto-scheduler workers) still see the real host."""
    real = llvm.get_host_cpu_features

    def get_host_cpu_features():
        features = real()
        return type(features)({name: on and not name.startswith(prefixes) for name, on in features.items()})

    llvm.get_host_cpu_features = get_host_cpu_features
    host_cpu.cache_clear()


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")
