"""Replaying a schedule from JSON checks every field's type, and a replay that fails part
way leaves the schedule as it was."""
import json

import pytest

import schedlang as sl


def _program():
    A = sl.placeholder((16, 16), name="A")
    B = sl.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="B")
    C = sl.compute((16, 16), lambda i, j: B[i, j] * 2.0, name="C")
    return A, B, C


def _json(*steps):
    return json.dumps({"version": 1, "steps": list(steps)})


@pytest.mark.parametrize("step, field, want", [
    ({"primitive": "reorder", "stage": "C", "axes": "ji"}, "axes", "a list of strings"),
    ({"primitive": "fuse", "stage": "C", "axes": ["i", 3]}, "axes", "a list of strings"),
    ({"primitive": "split", "stage": "C", "axis": "i", "factor": "4"}, "factor", "an integer, a size variable's name or null"),
    ({"primitive": "split", "stage": "C", "axis": "i", "factor": True}, "factor", "an integer, a size variable's name or null"),
    ({"primitive": "tile", "stage": "C", "x": "i", "y": "j", "x_factor": 4.0, "y_factor": 4}, "x_factor", "an integer"),
    ({"primitive": "unroll", "stage": ["C"], "axis": "i"}, "stage", "a string"),
    ({"primitive": "cache_read", "tensor": "A", "scope": "local", "readers": "B"}, "readers", "a list of strings"),
])
def test_wrong_field_type_names_the_step_and_field(step, field, want):
    A, B, C = _program()
    s = sl.create_schedule(C.op)
    with pytest.raises(ValueError, match=f"step '{step['primitive']}': field '{field}' must be {want}"):
        s.apply_json(_json(step))
    assert s.steps == []


def test_failed_replay_leaves_the_schedule_as_it_was():
    A, B, C = _program()
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].vectorize(C.op.axis[1])
    before = (str(s), sl.lower(s, [A, C]), [st.name for st in s.stages], list(s[C].leaf_iter_vars))
    text = _json({"primitive": "cache_write", "tensor": "B", "scope": "local"},
                 {"primitive": "compute_inline", "stage": "B"},
                 {"primitive": "split", "stage": "C", "axis": "i.inner", "factor": 2},
                 {"primitive": "pragma", "stage": "C", "axis": "i.outer", "key": "auto_unroll_max_step", "value": 4},
                 {"primitive": "unroll", "stage": "C", "axis": "no_such_axis"})
    with pytest.raises(sl.ScheduleError, match="no_such_axis"):
        s.apply_json(text)
    after = (str(s), sl.lower(s, [A, C]), [st.name for st in s.stages], list(s[C].leaf_iter_vars))
    assert after[:3] == before[:3] and all(a is b for a, b in zip(after[3], before[3]))
    assert not s[C].pragmas
    s[C].unroll(ii)                          # and it is still usable
    assert "unroll" in str(s)
