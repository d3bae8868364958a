"""Shared test options: --update-golden rewrites the golden IR files instead of comparing."""
import os

import pytest

# Verify the IR after every lowering pass in every test (schedlang/verify.py reads this at import).
os.environ.setdefault("SCHEDLANG_VERIFY", "1")
import schedlang.verify  # noqa: E402

schedlang.verify.ENABLED = os.environ["SCHEDLANG_VERIFY"] != "0"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.txt from the current printers")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")
