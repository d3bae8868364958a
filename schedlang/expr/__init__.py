"""Scalar expressions shared by every IR level, and the arithmetic on them."""
from .nodes import *  # noqa: F401,F403
from .equality import equal, key  # noqa: F401
from .functor import ExprMutator, map_children, substitute, walk, free_vars, uses_var  # noqa: F401
from .linear import from_linear, linear_form  # noqa: F401
from .simplify import simplify  # noqa: F401
from .bounds import const_bounds, relaxed_interval  # noqa: F401
