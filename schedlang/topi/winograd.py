"""Winograd convolution F(m x m, 3 x 3) for 3x3 stride-1 layers in NCHWc layouts (TVM topi's
`conv2d_nchw_winograd_without_weight_transform`, Lavin & Gray 2016), and its CPU schedule.

An output tile of m x m pixels is A^T [(G g G^T) * (B^T d B)] A, d the alpha x alpha input
tile (alpha = m + 2) under it: alpha^2 multiplies per tile, input and output channel where
the direct convolution does 9 m^2. The stages:

    wino_V[pos, p, ic]    = (B^T d B)[pos]          input transform, per tile p and input channel
    wino_M[pos, p, oc]    = sum_ic V[pos, p, ic] * U[pos, oc // nr, ic, oc % nr]
                                                    alpha^2 GEMMs [tiles x IC] x [IC x OC] (bgemm)
    out[n, ob, h, w, c]   = (A^T M A)[h % m, w % m]  inverse transform (+ bias, ReLU)

U = G g G^T is the weight transformed once in numpy (`transform_weight`), in panels of nr
output channels as the bgemm's register tile reads them (`prepack.py`'s "panels"). The
transform matrices come from the Cook-Toom construction over the interpolation points
0, 1, -1, 2, -2, 1/2, -1/2 (the first alpha - 1, and infinity), with exact rationals
(`transform_matrices`). The transforms are written out term by term with their constant
coefficients (a select over the unrolled position, folded by the simplifier): no multiply by
0 or 1 reaches the code. Tiles past the output (H or W not a multiple of m, P padded to the
register tile's rows) read zeros and are not written.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional, Tuple

import numpy as np

import schedlang as sl
from ..expr.extent import ceil_div
from .cpu import native_lanes

POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2))
TAPS = 3


def transform_matrices(m: int, r: int = TAPS) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T [m, alpha], G [alpha, r], B^T [alpha, alpha]) of F(m, r), float64, exact: the
    output y = A^T [(G g) * (B^T d)] for the correlation y[i] = sum_k g[k] d[i + k]."""
    alpha = m + r - 1
    if m < 1 or alpha - 1 > len(POINTS):
        raise ValueError(f"winograd: F({m}, {r}) needs {alpha - 1} interpolation points, "
                         f"at most {len(POINTS)} are known (m from 1 to {len(POINTS) - r + 2})")
    pts = POINTS[:alpha - 1]
    norm = [_prod(a - b for b in pts if b != a) for a in pts]
    at = [[a ** i for a in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = [[a ** k / n for k in range(r)] for a, n in zip(pts, norm)] + [[Fraction(int(k == r - 1)) for k in range(r)]]
    bt = _solve_bt(at, g, m, r, alpha)
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in (at, g, bt))


def _prod(values) -> Fraction:
    out = Fraction(1)
    for v in values:
        out *= v
    return out


def _solve_bt(at, g, m: int, r: int, alpha: int) -> list:
    """B^T such that sum_x A^T[i, x] G[x, k] B^T[x, l] = (l == i + k) for all i, k, l: for
    each column l, the alpha unknowns B^T[:, l] from m * r equations, by exact elimination."""
    rows = [[at[i][x] * g[x][k] for x in range(alpha)] for i in range(m) for k in range(r)]
    cols = []
    for l in range(alpha):
        rhs = [Fraction(int(l == i + k)) for i in range(m) for k in range(r)]
        cols.append(_exact_solve(rows, rhs, alpha))
    return [[cols[l][x] for l in range(alpha)] for x in range(alpha)]


def _exact_solve(rows, rhs, n: int) -> list:
    """The unique x with rows x = rhs (Gauss-Jordan over Fractions; ValueError if none or many)."""
    aug = [list(r) + [b] for r, b in zip(rows, rhs)]
    pivots, at = [], 0
    for c in range(n):
        piv = next((i for i in range(at, len(aug)) if aug[i][c] != 0), None)
        if piv is None:
            raise ValueError("winograd: the transform's equations are singular")
        aug[at], aug[piv] = aug[piv], aug[at]
        aug[at] = [v / aug[at][c] for v in aug[at]]
        for i in range(len(aug)):
            if i != at and aug[i][c] != 0:
                f = aug[i][c]
                aug[i] = [v - f * w for v, w in zip(aug[i], aug[at])]
        pivots.append(at)
        at += 1
    if any(row[-1] != 0 for row in aug[at:]):
        raise ValueError("winograd: the transform's equations have no solution")
    return [aug[p][-1] for p in pivots]


def transform_weight(w: np.ndarray, m: int, nr: int) -> np.ndarray:
    """U = G w G^T of a weight w [OC, IC, 3, 3], float32 [alpha^2, ceil(OC / nr), IC, nr]
    (output channels past OC zero), computed in float64."""
    oc, ic, kh, kw = w.shape
    if (kh, kw) != (TAPS, TAPS):
        raise ValueError(f"winograd: a {kh}x{kw} kernel (3x3 only)")
    _, g, _ = transform_matrices(m)
    alpha = m + TAPS - 1
    u = np.einsum("ak,oikl,bl->abio", g, w.astype(np.float64), g).reshape(alpha * alpha, ic, oc)
    panels = ceil_div(oc, nr)
    out = np.zeros((alpha * alpha, ic, panels * nr))
    out[:, :, :oc] = u
    return np.ascontiguousarray(out.reshape(alpha * alpha, ic, panels, nr).transpose(0, 2, 1, 3)).astype(np.float32)


def _combination(coeffs, read):
    """sum of c * read(index) over the nonzero constant coefficients {index: c}, without
    multiplying by 1 or -1."""
    expr = None
    for idx, c in coeffs.items():
        term = read(idx)
        c = float(c)
        if c == -1.0:
            expr = -term if expr is None else expr - term
            continue
        if c != 1.0:
            term = term * sl.const(c, "float32")
        expr = term if expr is None else expr + term
    return expr if expr is not None else sl.const(0.0, "float32")


def _select(index, arms):
    """arms[index] for an index expression in range(len(arms)): a select chain the
    simplifier folds to one arm where index is an unrolled loop's constant."""
    expr = arms[-1]
    for k in range(len(arms) - 2, -1, -1):
        expr = sl.if_then_else(index == k, arms[k], expr)
    return expr


def tile_rows(tiles: int, mr: int) -> int:
    """Rows of the bgemm's register tile for this many tiles: mr, or fewer where there are fewer tiles."""
    return max(1, min(mr, tiles))


# The stages' tags: the frontend's fusion keeps them (fuse.py) and its default schedule places
# them (schedules.py) by these.
TAG_D, TAG_T, TAG_V, TAG_M, TAG_Y = (f"winograd_{k}" for k in "DTVMY")
TAGS = (TAG_D, TAG_T, TAG_V, TAG_M, TAG_Y)


def winograd_inverse(read, shape, U, channels: int, m: int, pad: int = 1, mr: int = 6, name: str = "wino"):
    """The stages of F(m x m, 3 x 3) up to the inverse transform's row pass, over an input of
    shape (N, IC, H, W) read as read(n, c, y, x) (called only in range), by the transformed
    weight U [alpha^2, OC / nr, IC, nr] (transform_weight) with channels output channels:
    (value(n, o, y, x), an expression of the output reading Y; (OH, OW)). mr: the bgemm's
    register tile rows (the tile count is padded to a multiple)."""
    n, ic, h, w = (int(e) for e in shape)
    alpha = m + TAPS - 1
    pos_n, panels, uic, nr = (int(e) for e in U.shape)
    if pos_n != alpha * alpha or uic != ic or panels * nr < channels:
        raise ValueError(f"winograd: U {list(U.shape)} does not fit F({m}, 3) of an input {[n, ic, h, w]} "
                         f"with {channels} output channels")
    if pad not in (0, 1):
        raise ValueError(f"winograd: padding {pad} (0 or 1)")
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    th, tw = ceil_div(oh, m), ceil_div(ow, m)
    tiles = n * th * tw
    rows = tile_rows(tiles, mr)
    tiles_pad = ceil_div(tiles, rows) * rows
    at, _, bt = transform_matrices(m)
    zero = sl.const(0.0, "float32")

    def input_at(p, a, b, c):
        tn, t = p // (th * tw), p % (th * tw)
        y, x = (t // tw) * m + a - pad, (t % tw) * m + b - pad
        conds = []
        if pad:
            conds += [y >= 0, x >= 0]
        if (th - 1) * m + alpha - 1 - pad >= h:
            conds.append(y < h)
        if (tw - 1) * m + alpha - 1 - pad >= w:
            conds.append(x < w)
        if tiles_pad > tiles:
            conds.append(p < tiles)
        v = read(tn, c, y, x)
        return sl.if_then_else(sl.all(*conds) if len(conds) > 1 else conds[0], v, zero) if conds else v

    D = sl.compute((tiles_pad, alpha, alpha, ic), input_at, name=f"{name}_D", tag=TAG_D)
    # B^T d B as two passes of alpha terms or fewer (rows, then columns)
    T = sl.compute((alpha, alpha, tiles_pad, ic), lambda e, b, p, c: _select(e, [
        _combination({a: bt[k, a] for a in range(alpha) if bt[k, a] != 0}, lambda a: D[p, a, b, c])
        for k in range(alpha)]), name=f"{name}_T", tag=TAG_T)
    V = sl.compute((alpha * alpha, tiles_pad, ic), lambda pos, p, c: _select(pos % alpha, [
        _combination({b: bt[k, b] for b in range(alpha) if bt[k, b] != 0}, lambda b: T[pos // alpha, b, p, c])
        for k in range(alpha)]), name=f"{name}_V", tag=TAG_V)
    rc = sl.reduce_axis((0, ic), name="rc")
    M = sl.compute((alpha * alpha, tiles_pad, panels * nr),
                   lambda pos, p, o: sl.sum(V[pos, p, rc] * U[pos, o // nr, rc, o % nr], axis=rc),
                   name=f"{name}_M", tag=TAG_M)
    # A^T M A as two passes: Y[i, b] = sum_a A^T[i, a] M[a, b], then out = sum_b A^T[j, b] Y[i, b]
    Y = sl.compute((m, alpha, tiles_pad, panels * nr), lambda i, b, p, o: _select(i, [
        _combination({a: at[k, a] for a in range(alpha) if at[k, a] != 0}, lambda a: M[a * alpha + b, p, o])
        for k in range(m)]), name=f"{name}_Y", tag=TAG_Y)

    def value(bn, o, y, x):
        p = bn * (th * tw) + (y // m) * tw + x // m
        return _select(x % m, [_combination({b: at[k, b] for b in range(alpha) if at[k, b] != 0},
                                            lambda b: Y[y % m, b, p, o]) for k in range(m)])
    return value, (oh, ow)


def conv2d_winograd_nchwc(X, U, channels: int, m: int, pad: int = 1, mr: int = 6, bias=None,
                          relu: bool = False, name: str = "wino"):
    """The 3x3 stride-1 convolution of X [N, ICB, H, W, icb] by the transformed weight U
    [alpha^2, OC / nr, IC, nr] (transform_weight) as F(m x m, 3 x 3): out [N, channels /
    icb, OH, OW, icb], plus bias [channels] and a ReLU when given (winograd_inverse)."""
    n, icb, h, w, cb = (int(e) for e in X.shape)
    if channels % cb:
        raise ValueError(f"winograd: {channels} output channels are not blocks of {cb}")
    value, (oh, ow) = winograd_inverse(lambda b, c, y, x: X[b, c // cb, y, x, c % cb], (n, icb * cb, h, w), U,
                                       channels, m, pad, mr, name)
    zero = sl.const(0.0, "float32")

    def out_body(bn, ob, y, x, c):
        v = value(bn, ob * cb + c, y, x)
        if bias is not None:
            v = v + bias[ob * cb + c]
        return sl.max(v, zero) if relu else v

    return sl.compute((n, channels // cb, oh, ow, cb), out_body, name=name)


def stages(out):
    """(D, T, V, M, Y) of a Winograd output (or of any stage reading its Y): the input tiles,
    the row pass and the whole input transform, the bgemm, the inverse transform's row pass."""
    (Y,) = _tagged(out, TAG_Y)
    (M,) = _tagged(Y, TAG_M)
    (V,) = _tagged(M, TAG_V)
    (T,) = _tagged(V, TAG_T)
    (D,) = _tagged(T, TAG_D)
    return D, T, V, M, Y


def _tagged(t, tag: str) -> list:
    return list({i.op: i for i in t.op.input_tensors if getattr(i.op, "tag", "") == tag}.values())


def schedule_conv2d_winograd(s, out, target="llvm", mr: int = 6, lanes: int = 0):
    """The CPU schedule of a conv2d_winograd_nchwc output: schedule_input_transform,
    schedule_bgemm, schedule_inverse."""
    _, _, V, M, Y = stages(out)
    schedule_input_transform(s, V, lanes or native_lanes(target, "float32"))
    schedule_bgemm(s, M, mr)
    schedule_inverse(s, out, Y)
    return s


def schedule_input_transform(s, V, lanes: int) -> None:
    """V per (tile, lanes input channels) with the alpha^2 positions unrolled, its input
    tile D and row pass T computed there (local); tiles in parallel."""
    (T,) = _tagged(V, TAG_T)
    (D,) = _tagged(T, TAG_D)
    pos, p, c = s[V].op.axis
    co, ci = s[V].split(c, factor=lanes)
    s[V].reorder(p, co, pos, ci)
    s[V].unroll(pos)
    s[V].vectorize(ci)
    s[V].parallel(p)
    for st, small in ((T, (0, 1)), (D, (1, 2))):     # (the tile and channel axes: one and lanes there)
        s[st].compute_at(s[V], co)
        for ax in small:
            s[st].unroll(s[st].op.axis[ax])
        s[st].vectorize(s[st].op.axis[-1])


TILES_SPLIT = True      # tiles_between_threads may say yes (False: positions and channels, always)


def tiles_between_threads(M) -> bool:
    """Whether the bgemm M, and the inverse reading it, split the tiles between the threads as
    the input transform does, rather than M's positions and the inverse's channel blocks: where
    the transformed input V outweighs the transformed weight U (ResNet's 64-channel layers at
    56x56: 1.8 MB against 0.6 MB). Each thread then reads the part of V its own core wrote and
    writes the part of M its own inverse reads, and reads all of U; split the other way, each
    reads half of V and of M from the other core's cache and half of U."""
    (U,) = [t for t in M.op.input_tensors if t.ndim == 4]
    inputs = [t for t in M.op.input_tensors if t.ndim != 4]
    return TILES_SPLIT and len(inputs) == 1 and math.prod(map(int, inputs[0].shape)) > math.prod(map(int, U.shape))


def schedule_bgemm(s, M, mr: int) -> None:
    """The alpha^2 GEMMs as mr x nr register tiles (nr: U's panel width) accumulated in a
    local cache, the reduction outside the unrolled tile rows and vectorized columns (as
    `schedule_matmul_register_tiled`); one position's panel after another, so the panel
    stays in cache; positions x panels in parallel, or the tiles' row groups where
    tiles_between_threads (each group then passes over every position's panels)."""
    (U,) = [t for t in M.op.input_tensors if t.ndim == 4]
    nr = int(U.shape[-1])
    rows = tile_rows(int(M.shape[1]), mr)
    MC = s.cache_write(M, "local")
    mpos, mp, mo = s[M].op.axis
    po, pi = s[M].split(mp, factor=rows)
    oo, oi = s[M].split(mo, factor=nr)
    by_tiles = tiles_between_threads(M)
    s[M].reorder(*((po, mpos, oo) if by_tiles else (mpos, oo, po)), pi, oi)
    s[MC].compute_at(s[M], oo if by_tiles else po)      # (the register tile's loop)
    _, cp, co = s[MC].op.axis
    (k,) = s[MC].op.reduce_axis
    s[MC].reorder(k, cp, co)
    s[MC].unroll(cp)
    s[MC].vectorize(co)
    s[M].vectorize(oi)
    s[M].parallel(po if by_tiles else s[M].fuse(mpos, oo))


def schedule_inverse(s, out, Y) -> None:
    """out (a stage reading Y at its own pixels: the inverse transform with an epilogue, NCHW
    or NCHWc) by m x m pixel tiles unrolled, Y's rows for the tile computed there; the
    channels of a block vectorized (NCHWc); batch x channels (blocks) in parallel, or batch x
    rows of tiles where the bgemm splits the tiles between the threads (tiles_between_threads:
    each thread reads the part of M its own core wrote)."""
    m = int(Y.shape[0])
    b, ob, y, x, *lane = s[out].op.axis
    yo, yi = s[out].split(y, factor=m)
    xo, xi = s[out].split(x, factor=m)
    by_tiles = any(tiles_between_threads(M) for M in _tagged(Y, TAG_M))
    s[out].reorder(b, *((yo, ob) if by_tiles else (ob, yo)), xo, yi, xi, *lane)
    s[out].unroll(yi)
    s[out].unroll(xi)
    if lane:
        s[out].vectorize(lane[0])
    s[out].parallel(s[out].fuse(b, yo if by_tiles else ob))
    s[Y].compute_at(s[out], xo)
    i, yb, _, yc = s[Y].op.axis
    s[Y].unroll(i)
    s[Y].unroll(yb)
    if lane:
        s[Y].vectorize(yc)


def schedule_rows(s, Y, lanes: int) -> None:
    """Y (the inverse's row pass) as a kernel of its own, where no reader computes it per
    output tile: per tile and lanes output channels, its m x alpha values unrolled (the select
    over the row folds), tiles in parallel."""
    i, b, p, o = s[Y].op.axis
    oo, oi = s[Y].split(o, factor=lanes)
    s[Y].reorder(p, oo, i, b, oi)
    s[Y].unroll(i)
    s[Y].unroll(b)
    s[Y].vectorize(oi)
    s[Y].parallel(p)


def reference(x: np.ndarray, w: np.ndarray, pad: int, bias: Optional[np.ndarray] = None, relu: bool = False):
    """The convolution in float64 numpy, NCHW (the tests' independent reference)."""
    n, c, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - 2, wd + 2 * pad - 2
    out = np.zeros((n, w.shape[0], oh, ow))
    for a in range(3):
        for b in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, a:a + oh, b:b + ow], w[:, :, a, b].astype(np.float64))
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return np.maximum(out, 0) if relu else out
