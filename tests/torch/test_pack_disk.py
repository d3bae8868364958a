"""Packed constants kept on disk (schedlang/torch/pack_disk.py): a second PackCache with the
same weights maps the first one's constants, byte for byte what packing makes, without
packing; a changed weight (anywhere in it) is packed again, never answered by the stored
value; a damaged, truncated or foreign entry is not used; writes into a mapped constant stay
in the process; nothing is stored or read with the kernel cache off; concurrent writers
leave one whole entry; inside a compiled module's call the entry is written behind it, and
none where a source changed before it was written."""
import os
import threading

import pytest
import torch

from schedlang import disk
from schedlang.torch import pack_disk, prepack
from schedlang.torch.prepack import PackCache, PackSpec


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(disk.ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "1")
    monkeypatch.setattr(pack_disk, "stats", pack_disk.DiskStats())
    return tmp_path / "cache"


def _model():
    """State tensors and specs of every kind: panels (two dtypes), convolution blocks with a
    folded batch norm, their tiles, Winograd panels, a batch norm's shift."""
    torch.manual_seed(0)
    state = {
        "fc": torch.randn(70, 48), "fc16": torch.randn(33, 16).bfloat16(),
        "conv": torch.randn(24, 16, 3, 3), "var": torch.rand(24) + 0.5, "mean": torch.randn(24),
        "gamma": torch.rand(24) + 0.5, "beta": torch.randn(24), "w3": torch.randn(20, 6, 3, 3),
    }
    specs = {
        "p": PackSpec("fc", 16), "p16": PackSpec("fc16", 8),
        "c": PackSpec("conv", 8, "conv", ("gamma", "mean", "var"), (1e-5,)),
        "t": PackSpec("conv", 8, "conv_tiles", ("gamma", "mean", "var"), (3, 1e-5)),
        "u": PackSpec("w3", 16, "winograd", (), (4,)),
        "s": PackSpec("var", 1, "bn_shift", ("mean", "gamma", "beta", None), (1e-5,)),
    }
    return state, specs


def _packed(specs, state):
    return {n: prepack.make(s, [None if x is None else state[x] for x in s.sources]) for n, s in specs.items()}


def _same_bytes(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.reshape(-1).view(torch.uint8),
                                                                      b.reshape(-1).view(torch.uint8))


def _refuse(*args, **kwargs):
    raise AssertionError("packed again")


def test_a_second_cache_maps_what_the_first_packed(cache, monkeypatch):
    state, specs = _model()
    want = _packed(specs, state)
    first = PackCache(specs, disk=True).values(state)
    assert pack_disk.stats.stores == 1 and pack_disk.stats.loads == 0
    assert all(_same_bytes(first[n], want[n]) for n in specs)
    real = prepack.make
    monkeypatch.setattr(prepack, "make", _refuse)
    again = PackCache(specs, disk=True)
    got = again.values(state)
    assert pack_disk.stats.loads == len(specs) and pack_disk.stats.stores == 1, "all mapped, nothing written"
    assert all(_same_bytes(got[n], want[n]) for n in specs), "bit for bit"
    assert all(got[n].data_ptr() % 64 == 0 for n in specs)
    assert all(again.values(state)[n] is got[n] for n in specs), "kept, as packed ones are"
    with torch.no_grad():
        state["fc"].mul_(2)                   # an in-place write: packed again in memory, not looked up
    monkeypatch.setattr(prepack, "make", real)
    assert _same_bytes(again.values(state)["p"], prepack.pack(state["fc"], 16))
    assert pack_disk.stats.loads == len(specs) and pack_disk.stats.stores == 1


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_changed_weight_is_packed_again(cache, monkeypatch, where):
    """One element changed: in the middle of the weight (the entry's key samples its ends:
    the same entry, the bytes compared) or at its end (another key)."""
    state, specs = _model()
    PackCache(specs, disk=True).values(state)
    changed = dict(state, conv=state["conv"].clone())
    changed["conv"].view(-1)[changed["conv"].numel() // 2 if where == "middle" else -1] += 1.0
    want = _packed(specs, changed)
    made = []
    real = prepack.make
    monkeypatch.setattr(prepack, "make", lambda spec, tensors: made.append(spec.kind) or real(spec, tensors))
    got = PackCache(specs, disk=True).values(changed)
    assert all(_same_bytes(got[n], want[n]) for n in specs)
    if where == "middle":
        assert sorted(made) == ["conv", "conv_tiles"], "only the constants of the changed source"
        assert pack_disk.stats.loads == len(specs) - 2
    assert pack_disk.stats.stores == 2
    del made[:]
    again = PackCache(specs, disk=True).values(changed)          # the entry just written
    assert made == [] and all(_same_bytes(again[n], want[n]) for n in specs)


@pytest.mark.parametrize("damage", ["header", "truncated", "key"])
def test_a_damaged_entry_is_not_used(cache, damage):
    state, specs = _model()
    PackCache(specs, disk=True).values(state)
    key = pack_disk.key_text(specs, state)
    path = disk.entry_path(pack_disk.FOLDER, key)
    data = bytearray(path.read_bytes())
    if damage == "header":
        data[len(pack_disk.MAGIC) + 20] ^= 1
    elif damage == "truncated":
        data = data[:-100]
    else:                                   # another key's entry under this key's file name
        other = dict(state, fc=torch.randn(70, 48))
        PackCache(specs, disk=True).values(other)
        data = bytearray(disk.entry_path(pack_disk.FOLDER, pack_disk.key_text(specs, other)).read_bytes())
    path.write_bytes(bytes(data))
    rejected = pack_disk.stats.rejected
    got = PackCache(specs, disk=True).values(state)
    assert pack_disk.stats.rejected == rejected + 1
    want = _packed(specs, state)
    assert all(_same_bytes(got[n], want[n]) for n in specs)
    assert pack_disk.load(key, specs, state).keys() == specs.keys(), "stored again whole"


def test_writes_into_a_mapped_constant_stay_in_the_process(cache):
    state, specs = _model()
    want = _packed(specs, state)
    PackCache(specs, disk=True).values(state)
    got = PackCache(specs, disk=True).values(state)
    with torch.no_grad():
        got["p"].fill_(7.0)                   # copy-on-write: the file keeps the packed bytes
    assert all(_same_bytes(v, want[n]) for n, v in PackCache(specs, disk=True).values(state).items())


def test_nothing_on_disk_with_the_kernel_cache_off(cache, monkeypatch):
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "0")
    state, specs = _model()
    PackCache(specs, disk=True).values(state)
    PackCache(specs, disk=True).values(state)
    assert pack_disk.stats == pack_disk.DiskStats()
    assert not (cache / pack_disk.FOLDER).exists()


def test_sources_that_are_not_plain_cpu_tensors_are_packed_as_before(cache):
    state, specs = _model()
    state["fc"] = torch.randn(48, 70).t()             # not contiguous: its constant is not stored
    PackCache(specs, disk=True).values(state)
    key = pack_disk.key_text(specs, state)
    assert set(pack_disk.load(key, specs, state)) == set(specs) - {"p"}
    got = PackCache(specs, disk=True).values(state)
    assert _same_bytes(got["p"], prepack.pack(state["fc"], 16))
    assert pack_disk.stats.stores == 1, "a constant never storable does not rewrite the entry"


def test_concurrent_writers_leave_one_whole_entry(cache):
    state, specs = _model()
    key = pack_disk.key_text(specs, state)
    values = _packed(specs, state)
    threads = [threading.Thread(target=pack_disk.store, args=(key, specs, state, values)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    folder = cache / pack_disk.FOLDER
    assert [p.name for p in folder.iterdir()] == [disk.entry_path(pack_disk.FOLDER, key).name], "no temporary left"
    got = pack_disk.load(key, specs, state)
    assert got.keys() == specs.keys() and all(_same_bytes(got[n], values[n]) for n in specs)


def test_written_behind_a_deferred_call(cache):
    """Inside kernel_cache.deferred() (a compiled module's calls) the entry is written by the
    writer thread: the call returns first; a load in this process waits for it."""
    from schedlang import kernel_cache
    state, specs = _model()
    gate = threading.Event()
    with kernel_cache.deferred():
        kernel_cache.later(gate.wait, "test", "gate")          # the writer busy until the gate opens
        PackCache(specs, disk=True).values(state)
    assert pack_disk.stats.stores == 0, "not written before the call returned"
    gate.set()
    got = PackCache(specs, disk=True).values(state)           # its load waits for the entry
    assert pack_disk.stats.stores == 1 and pack_disk.stats.loads == len(specs)
    assert all(_same_bytes(got[n], prepack.make(s, [None if x is None else state[x] for x in s.sources]))
               for n, s in specs.items())


def test_a_source_written_in_place_before_its_entry_is_written_leaves_none(cache):
    """The stored copy of a source could be half old, half new: no entry is kept (its version
    moved), and a later cache packs from the new weight."""
    from schedlang import kernel_cache
    state, specs = _model()
    gate = threading.Event()
    with kernel_cache.deferred():
        kernel_cache.later(gate.wait, "test", "gate")
        PackCache(specs, disk=True).values(state)
    with torch.no_grad():
        state["fc"].mul_(2)
    gate.set()
    kernel_cache.flush()
    assert pack_disk.stats.stores == 0 and not any((cache / pack_disk.FOLDER).glob("*"))
    got = PackCache(specs, disk=True).values(state)
    assert pack_disk.stats.loads == 0 and _same_bytes(got["p"], prepack.pack(state["fc"], 16))


def test_not_stored_beyond_the_size_cap(cache, monkeypatch):
    monkeypatch.setenv(disk.MAX_BYTES_ENV, "16K")
    state, specs = _model()
    PackCache(specs, disk=True).values(state)
    assert pack_disk.stats.stores == 0 and not any((cache / pack_disk.FOLDER).glob("*" + disk.ENTRY_SUFFIX))
    assert os.path.isdir(cache)


@pytest.mark.parametrize("memcmp", [True, False])
def test_the_byte_comparison(monkeypatch, memcmp):
    """pack_disk._equal by the C library's memcmp and by numpy's blocks (a size not a multiple
    of 8 bytes or of a block; a difference in the last block, the tail, the first byte)."""
    import numpy as np
    if not memcmp:
        monkeypatch.setattr(pack_disk, "_memcmp", lambda: None)
        monkeypatch.setattr(pack_disk, "WORDS", 64)
    a = np.random.default_rng(0).integers(0, 256, 8 * 64 * 3 + 13, dtype=np.uint8)
    assert pack_disk._equal(a, a.copy()) and pack_disk._equal(a[:0], a[:0].copy())
    assert not pack_disk._equal(a, a[:-1].copy())
    for at in (0, 8 * 64 * 3 - 5, a.size - 1):
        b = a.copy()
        b[at] ^= 0x80
        assert not pack_disk._equal(a, b)
