"""`python -m schedlang ...`: the same command line as `schedlang` (schedlang/cli.py)."""
import sys

from .cli import main

sys.exit(main())
