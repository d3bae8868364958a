"""Tensor IR <-> canonical JSON and the workload key: the round trip keeps the program's
meaning (reference evaluator, schedule replay and build), the key is id-free, and bad or
unknown input is a clear error."""
import json

import numpy as np
import pytest

import schedlang as sl
from schedlang.expr.nodes import Buffer, Load
from schedlang.tensor.serialize import VERSION, from_json, to_json, workload_key
from tests import programs
from tests.helpers import random_input
from tests.lowering.random_schedules import all_programs, random_schedule, run_case, Program


def _every_kind():
    """One program using every Tensor IR node kind: comm_reducer with where=, if_then_else,
    select, casts, math calls, all/any, not, bitwise and shifts, compares, inf identities,
    float16/int8/uint8/bool dtypes, a tag and attrs."""
    A = sl.placeholder((6, 5), name="A")
    M = sl.placeholder((6,), "int8", name="M")
    U = sl.placeholder((5,), "uint8", name="U")
    k = sl.reduce_axis((0, 5), name="k")
    absmax = sl.comm_reducer(lambda a, b: sl.max(sl.abs(a), sl.abs(b)), lambda dt: sl.const(0.0, dt), name="absmax")
    R = sl.compute((6,), lambda i: absmax(A[i, k], axis=k, where=sl.any(k <= i, k == 4)), name="R")
    k2 = sl.reduce_axis((1, 5), name="k2")
    mx = sl.compute((6,), lambda i: sl.max(A[i, k2], axis=k2), name="mx")
    E = sl.compute((6, 5), lambda i, j: sl.if_then_else(
        sl.all(i >= 1, j < 4, ~(A[i, j] > 0.5)),
        sl.exp(A[i, j] - mx[i]) + sl.power(A[i, j], 2.0) + sl.sqrt(sl.abs(A[i, j])),
        sl.select(M[i].astype("int32") % 3 == 0, sl.cast("float32", M[i]), R[i] * sl.const(float("inf")))),
        name="E", tag="elemwise", attrs={"note": "all kinds", "n": 3})
    B = sl.compute((6, 5), lambda i, j: ((U[j] >> 1) | (U[j] & 3) ^ 5).astype("float16") + E[i, j].astype("float16"),
                   name="B")
    flag = sl.compute((6,), lambda i: sl.any(R[i] > 0.2, (i // 2) * 2 == i), name="flag")
    return [A, M, U], [B, flag, R]


def _programs():
    out = {}
    for name, p in all_programs().items():
        out[name] = (p.inputs, p.outputs)
    for name, tensors in [("gemm", programs.gemm(5, 6, 7)), ("packed_gemm", programs.packed_gemm(4, 16, 5, 8)),
                          ("conv2d", programs.conv2d(1, 2, 5, 6, 3, 3)), ("softmax", programs.softmax(3, 7)),
                          ("row_sum", programs.row_sum(3, 9)), ("silu_and_mul", programs.silu_and_mul(3, 8))]:
        inputs = [t for t in tensors if isinstance(t.op, sl.tensor.PlaceholderOp)]
        out[f"programs.{name}"] = (inputs, [tensors[-1]])
    out["every_kind"] = _every_kind()
    return out


PROGRAMS = _programs()


def _feed(inputs, seed=0):
    rng = np.random.default_rng(seed)
    return [random_input(t.shape, t.dtype, rng) for t in inputs]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_round_trip_keeps_meaning(name):
    inputs, outputs = PROGRAMS[name]
    text = to_json(inputs + outputs)
    back = from_json(text)
    assert to_json(back) == text                       # canonical: a fixed point
    new_inputs, new_outputs = back[:len(inputs)], back[len(inputs):]
    assert [t.name for t in back] == [t.name for t in inputs + outputs]
    assert all(a is not b for a, b in zip(back, inputs + outputs))
    arrays = _feed(inputs)
    want = sl.reference(outputs, dict(zip(inputs, arrays)))
    got = sl.reference(new_outputs, dict(zip(new_inputs, arrays)))
    for g, w, t in zip(got, want, outputs):
        np.testing.assert_array_equal(g, w, err_msg=t.name)


def test_every_kind_is_covered():
    kinds = {n["kind"] for n in _walk_json(json.loads(to_json(_every_kind()[1])))}
    assert {"placeholder", "compute", "reduce", "read", "binary", "compare", "logical", "not", "select",
            "cast", "call", "const", "var"} <= kinds


def _walk_json(data):
    if isinstance(data, dict):
        yield data if "kind" in data else {"kind": None}
        for v in data.values():
            yield from _walk_json(v)
    elif isinstance(data, list):
        for v in data:
            yield from _walk_json(v)


@pytest.mark.parametrize("name", sorted(all_programs()))
def test_schedule_json_replays_on_the_deserialised_program(name):
    p = all_programs()[name]
    s = random_schedule(p, seed=11)
    back = from_json(to_json(p.inputs + p.outputs))
    q = Program(p.name, back[:len(p.inputs)], back[len(p.inputs):], p.draw, p.rtol, p.atol)
    s2 = q.schedule().apply_json(s.to_json())
    assert s2.to_json() == s.to_json()
    assert run_case(q, s2, seed=3) is None            # builds and matches the reference


def _softmax_key(n=7, m=33, names=("X", "maxval")):
    X = sl.placeholder((n, m), name=names[0])
    k = sl.reduce_axis((0, m), name="k")
    mx = sl.compute((n,), lambda i: sl.max(X[i, k], axis=k), name=names[1])
    out = sl.compute((n, m), lambda i, j: sl.exp(X[i, j] - mx[i]), name="out")
    return workload_key([out])


def test_key_is_id_free_and_stable():
    assert _softmax_key() == _softmax_key()
    assert len(_softmax_key()) == 64 and int(_softmax_key(), 16) >= 0
    A1, B1, C1 = programs.gemm(8, 8, 8)
    A2, B2, C2 = programs.gemm(8, 8, 8)
    assert to_json([C1]) == to_json([C2])
    assert workload_key([A1, B1, C1]) == workload_key([A2, B2, C2])
    assert workload_key([A1, B1, C1]) != workload_key([B1, A1, C1])     # the order of the tensors counts


def test_key_changes_with_names_shapes_dtypes_and_expressions():
    base = workload_key(programs.gemm(8, 8, 8)[2:])
    assert workload_key(programs.gemm(8, 8, 9)[2:]) != base
    assert workload_key(programs.gemm(8, 8, 8, "float64")[2:]) != base
    assert _softmax_key(names=("Y", "maxval")) != _softmax_key()       # names are part of the key
    assert _softmax_key(names=("X", "mx")) != _softmax_key()
    A = sl.placeholder((8, 8), name="A")
    B = sl.placeholder((8, 8), name="B")
    k = sl.reduce_axis((0, 8), name="k")
    plus = sl.compute((8, 8), lambda i, j: sl.sum(A[i, k] + B[k, j], axis=k), name="C")
    assert workload_key([plus]) != base
    k = sl.reduce_axis((0, 8), name="k")
    transposed = sl.compute((8, 8), lambda i, j: sl.sum(A[i, k] * B[j, k], axis=k), name="C")
    assert workload_key([transposed]) != base


def test_shared_objects_stay_shared():
    """A reduce_axis used by two computes stays one axis; a tensor read twice stays one op."""
    A = sl.placeholder((4, 4), name="A")
    k = sl.reduce_axis((0, 4), name="k")
    S = sl.compute((4,), lambda i: sl.sum(A[i, k], axis=k), name="S")
    T = sl.compute((4,), lambda i: sl.max(A[k, i], axis=k), name="T")
    S2, T2 = from_json(to_json([S, T]))
    assert S2.op.reduce_axis[0] is T2.op.reduce_axis[0]
    assert S2.op.input_tensors[0].op is T2.op.input_tensors[0].op
    assert S.op.reduce_axis[0] is not S2.op.reduce_axis[0]


def test_format_is_versioned_and_readable():
    A, B, C = programs.gemm(2, 3, 4)
    data = json.loads(to_json([C]))
    assert data["version"] == VERSION == 1
    assert [op["kind"] for op in data["ops"]] == ["placeholder", "placeholder", "compute"]
    assert [v["name"] for v in data["vars"]] == ["i", "j", "x", "y", "k"]
    assert data["outputs"] == [[2, 0]]


def test_bad_json_errors():
    A, B, C = programs.gemm(2, 3, 4)
    data = json.loads(to_json([C]))
    with pytest.raises(ValueError, match="version 2 is not supported"):
        from_json(json.dumps({**data, "version": 2}))
    with pytest.raises(ValueError, match="\"version\" field"):
        from_json("[]")
    bad = json.loads(to_json([C]))
    bad["ops"][2]["body"]["source"][0]["kind"] = "fma"
    with pytest.raises(ValueError, match="unknown expression kind 'fma'; known kinds: .*binary"):
        from_json(json.dumps(bad))
    bad = json.loads(to_json([C]))
    bad["ops"][0]["kind"] = "fft"
    with pytest.raises(ValueError, match="unknown operation kind 'fft'"):
        from_json(json.dumps(bad))
    bad = json.loads(to_json([C]))
    del bad["ops"][2]["body"]["source"][0]["a"]
    with pytest.raises(ValueError, match="missing fields \\['a'\\]"):
        from_json(json.dumps(bad))
    bad = json.loads(to_json([C]))
    del bad["vars"][0]["dtype"]
    with pytest.raises(ValueError, match="malformed: KeyError: 'dtype'"):
        from_json(json.dumps(bad))
    bad = json.loads(to_json([C]))
    bad["outputs"] = [[7, 0]]
    with pytest.raises(ValueError, match="operation reference 7 is out of range"):
        from_json(json.dumps(bad))


def test_unknown_node_kind_is_an_error_not_a_skip():
    A = sl.placeholder((4,), name="A")
    buf = Buffer("b", (4,), A.dtype_obj)
    C = sl.compute((4,), lambda i: A[i] + Load(buf, (i.var,)), name="C")
    with pytest.raises(TypeError, match="cannot serialise expression kind Load"):
        to_json([C])
    with pytest.raises(TypeError, match="to_json takes tensors"):
        to_json([42])


def test_non_json_attrs_are_an_error():
    A = sl.placeholder((4,), name="A")
    C = sl.compute((4,), lambda i: A[i], name="C", attrs={"f": object()})
    with pytest.raises(TypeError, match="attribute 'f'"):
        to_json([C])


def test_a_field_missing_from_the_table_is_an_error(monkeypatch):
    """A node kind that gains a field must list it, or serialising refuses (no silent drop)."""
    import dataclasses as dc

    from schedlang.expr.nodes import Expr
    from schedlang.tensor import serialize

    @dc.dataclass(frozen=True, eq=False, repr=False)
    class Fma(Expr):
        a: Expr
        b: Expr
        c: Expr
        __hash__ = object.__hash__

        @property
        def dtype(self):
            return self.a.dtype

    monkeypatch.setattr(serialize, "_EXPR_KINDS", dict(serialize._EXPR_KINDS))
    monkeypatch.setattr(serialize, "_EXPR_BY_KIND", dict(serialize._EXPR_BY_KIND))
    serialize.register_expr(Fma, "fma", (("a", "expr"), ("b", "expr")))
    A = sl.placeholder((4,), name="A")
    C = sl.compute((4,), lambda i: Fma(A[i], A[i], A[i]), name="C")
    with pytest.raises(TypeError, match=r"Fma has fields \['c'\] that its entry"):
        to_json([C])
    serialize.register_expr(Fma, "fma", (("a", "expr"), ("b", "expr"), ("c", "expr")))   # a few lines add a kind
    (C2,) = from_json(to_json([C]))
    assert type(C2.op.body) is Fma and to_json([C2]) == to_json([C])


def test_shared_subexpressions_serialise_once():
    """A 40-level DAG (2**40 paths as a tree) is written and read back in linear size, as a DAG."""
    A = sl.placeholder((8,), name="A")

    def body(i):
        e = A[i] * 0.5
        for _ in range(40):
            e = e + e
        return e
    B = sl.compute((8,), body, name="B")
    text = to_json([B])
    assert len(text) < 20_000 and len(json.loads(text)["shared"]) == 40   # each level once, referenced twice
    (B2,) = from_json(text)
    assert to_json([B2]) == text
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(sl.reference([B2], {B2.op.input_tensors[0]: a})[0], a * 0.5 * 2.0 ** 40)


def test_scan_and_extern_round_trip_and_have_a_workload_key():
    """ScanOp and ExternOp (with its packed call's buffer handles and scalars) serialise:
    the build cache's workload key needs every op kind."""
    m, n = 6, 4
    X = sl.placeholder((m, n), name="X")
    s_state = sl.placeholder((m, n), name="s_state")
    s_init = sl.compute((1, n), lambda _, i: X[0, i], name="s_init")
    s_update = sl.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
    S = sl.scan(s_init, s_update, s_state, inputs=[X], name="S")
    E = sl.extern((m, n), [S], lambda ins, outs: sl.call_packed("test.serialize.f", ins[0], outs[0], 2, 0.5, True),
                  name="E")
    text = to_json([E])
    back = from_json(text)
    assert to_json(back) == text
    assert workload_key(back) == workload_key([E])
    assert isinstance(back[0].op, type(E.op)) and back[0].op.body.args[2:] == (2, 0.5, True)
    assert type(back[0].op.body.args[4]) is bool
    assert type(back[0].op.inputs[0].op).__name__ == "ScanOp"
