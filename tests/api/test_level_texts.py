"""mod.ir prints each level's text on its first read (schedlang/texts.py), the same text as sl.lower."""
import schedlang as sl
from schedlang.texts import LevelTexts
from tests import programs


def test_built_module_texts_match_lower():
    A, B, C = programs.gemm(6, 10, 5)
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].vectorize(ji)
    mod = sl.build(s, [A, B, C], cache=False)
    assert isinstance(mod.ir, LevelTexts)
    for level in ("tensor", "loop", "tile", "kernel"):
        assert mod.ir[level] == str(sl.lower(s, [A, B, C], level=level)), level
    assert set(dict(mod.ir)) == {"tensor", "loop", "tile", "kernel", "llvm", "llvm.opt"}


def test_a_text_is_printed_once_and_only_when_read():
    calls = []

    def render(name):
        def text():
            calls.append(name)
            return f"<{name}>"
        return text
    texts = LevelTexts({"tile": render("tile"), "kernel": render("kernel"), "llvm": "; module"})
    copy = texts.copy()
    assert "tile" in texts and len(texts) == 3 and calls == []
    assert texts["tile"] == "<tile>" and texts["tile"] == "<tile>" and calls == ["tile"]
    assert copy["kernel"] == "<kernel>" and calls == ["tile", "kernel"]      # a copy prints on its own
    assert dict(texts) == {"tile": "<tile>", "kernel": "<kernel>", "llvm": "; module"}
    assert texts == {"tile": "<tile>", "kernel": "<kernel>", "llvm": "; module"}
    texts["llvm.opt"] = "; optimized"
    del texts["llvm"]
    assert list(texts) == ["tile", "kernel", "llvm.opt"]
