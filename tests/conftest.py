"""Shared test options: --update-golden rewrites the golden IR files instead of comparing."""
import pytest


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.txt from the current printers")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")
