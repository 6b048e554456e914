"""Persisted clone index: build, load, query, incremental update, error handling, atomicity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twinspect.code.encoders.lexical import LexicalEncoder
from twinspect.code.fragments import extract_fragments
from twinspect.code.store import CloneIndex
from twinspect.errors import IndexFormatError, InputError

MATH = '''
def mean(values):
    total = 0
    for v in values:
        total += v
    return total / len(values)


def fib(n):
    a, b = 0, 1
    while n > 0:
        a, b = b, a + b
        n -= 1
    return a
'''

STATS = '''
def average(numbers):
    acc = 0
    for x in numbers:
        acc += x
    return acc / len(numbers)


def outer(items):
    def inner(item):
        if item is None:
            return 0
        return len(item)
    return [inner(i) for i in items]
'''

IO = '''
def read_config(path):
    with open(path) as fh:
        data = fh.read()
    if not data:
        raise ValueError("empty config")
    return data.splitlines()
'''

JAVA = """
class Acc {
    int sumArray(int[] xs) {
        int s = 0;
        for (int i = 0; i < xs.length; i++) { s += xs[i]; }
        return s;
    }
}
"""

NEW = '''
def fibonacci(k):
    x, y = 0, 1
    while k > 0:
        x, y = y, x + y
        k -= 1
    return x
'''


def write_tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "math.py").write_text(MATH)
    (root / "pkg" / "stats.py").write_text(STATS)
    (root / "io.py").write_text(IO)
    (root / "Acc.java").write_text(JAVA)
    (root / "README.md").write_text("not code")
    return root


def build(tmp_path, kind="exact", **kw):
    src = write_tree(tmp_path / "src")
    out = tmp_path / "idx"
    params = {"seed": 1, "num_threads": 1} if kind == "hnsw" else {}
    store = CloneIndex.build([src], out, encoder=LexicalEncoder(dim=512), index_kind=kind,
                             index_params=params, min_lines=4, **kw)
    return src, out, store


def names(hits):
    return [f.name for f, _ in hits]


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_build_load_query(tmp_path, kind):
    src, out, store = build(tmp_path, kind)
    got = {(f.path, f.name) for f in store.fragments}
    assert got == {
        ("pkg/math.py", "mean"), ("pkg/math.py", "fib"), ("pkg/stats.py", "average"),
        ("pkg/stats.py", "outer"), ("pkg/stats.py", "outer.inner"), ("io.py", "read_config"),
        ("Acc.java", "Acc.sumArray"),
    }
    assert store.vectors.shape == (7, 512) and store.stats["fragments"] == 7
    assert (out / "manifest.json").is_file() and (out / "vectors.npy").is_file()
    assert (out / "ann").is_dir() == (kind == "hnsw")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["index"]["kind"] == kind and manifest["encoder"]["name"] == "lexical"
    assert manifest["roots"] == [str(src)]

    loaded = CloneIndex.load(out)
    assert loaded.fragments == store.fragments
    np.testing.assert_array_equal(loaded.vectors, store.vectors)
    assert loaded.encoder.config() == store.encoder.config()

    mean = next(f for f in loaded.fragments if f.name == "mean")
    hits = loaded.query(mean, k=3)
    assert hits[0][0].name == "average" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert "mean" not in names(hits) and len(hits) == 3
    assert all(a[1] >= b[1] for a, b in zip(hits, hits[1:]))
    # nested functions: neither the parent nor the child is returned for the other
    outer = next(f for f in loaded.fragments if f.name == "outer")
    assert not {"outer", "outer.inner"} & set(names(loaded.query(outer, k=10)))
    # threshold cuts the list
    assert names(loaded.query(mean, k=10, threshold=0.99)) == ["average"]
    # a new fragment (not in the index) is embedded with the stored IDF
    new = extract_fragments(NEW, "new.py", "python", min_lines=4)[0]
    assert loaded.query(new, k=1)[0][0].name == "fib"
    with pytest.raises(InputError):
        loaded.query(mean, k=0)


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_update_reembeds_only_changed_files(tmp_path, kind):
    src, out, store = build(tmp_path, kind)
    before = {f.key: v for f, v in zip(store.fragments, store.vectors)}
    state_before = store.encoder.state_dict()
    # change one file, add one, delete one, leave two untouched
    (src / "pkg" / "math.py").write_text(MATH.replace("total", "s"))
    (src / "new.py").write_text(NEW)
    (src / "io.py").unlink()
    loaded = CloneIndex.load(out)
    res = loaded.update(quiet=True, refit_idf=False)
    assert res["added_files"] == 1 and res["changed_files"] == 1
    assert res["removed_files"] == 1 and res["unchanged_files"] == 2
    assert res["embedded_fragments"] == 3  # mean + fib (changed file), fibonacci (new)
    assert res["removed_fragments"] == 3  # old mean + fib, read_config
    assert res["refit_idf"] is False
    keys = {f.key for f in loaded.fragments}
    assert "io.py:2-7" not in keys and any(k.startswith("new.py:") for k in keys)
    # unchanged fragments keep their vectors, the IDF is unchanged
    for f, v in zip(loaded.fragments, loaded.vectors):
        if f.path in ("pkg/stats.py", "Acc.java"):
            np.testing.assert_array_equal(v, before[f.key])
    np.testing.assert_array_equal(loaded.encoder.state_dict()["df"], state_before["df"])
    # the k-NN index follows: fib's nearest is now the new fibonacci
    fib = next(f for f in loaded.fragments if f.name == "fib")
    assert loaded.query(fib, k=1)[0][0].name == "fibonacci"
    assert "read_config" not in {f.name for f, _ in loaded.query(fib, k=10)}
    # the update is persisted
    again = CloneIndex.load(out)
    assert again.fragments == loaded.fragments
    assert again.manifest["last_update"] == res
    # a second update with no change embeds nothing
    res2 = again.update()
    assert res2["embedded_fragments"] == 0 and res2["unchanged_files"] == 4
    assert CloneIndex.load(out).fragments == again.fragments


def test_update_refits_idf_when_most_code_changed(tmp_path):
    src, out, store = build(tmp_path)
    n0 = int(store.encoder.state_dict()["n_docs"])
    for p in src.rglob("*.py"):
        p.write_text(p.read_text().replace("return", "return  ") + "\n\n" + NEW.replace("fibonacci", p.stem + "_x"))
    res = store.update()  # auto: >50 % of fragments new since the fit
    assert res["refit_idf"] is True
    assert res["embedded_fragments"] == len(store.fragments)
    assert int(store.encoder.state_dict()["n_docs"]) == len(store.fragments) != n0
    # vectors equal a fresh fit on the same fragments
    fresh = LexicalEncoder(dim=512).fit(store.fragments).encode(store.fragments)
    np.testing.assert_allclose(store.vectors, fresh, atol=1e-6)
    assert CloneIndex.load(out).manifest["idf"]["embedded_since_fit"] == 0


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(IndexFormatError, match="twinspect clones index"):
        CloneIndex.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexFormatError, match="no manifest"):
        CloneIndex.load(tmp_path / "empty")
    _, out, _ = build(tmp_path, "hnsw")
    manifest = json.loads((out / "manifest.json").read_text())

    def rewrite(**changes):
        (out / "manifest.json").write_text(json.dumps({**manifest, **changes}))

    rewrite(format_version=99)
    with pytest.raises(IndexFormatError, match="version 99"):
        CloneIndex.load(out)
    rewrite(counts={"fragments": 8, "files": 4})
    with pytest.raises(IndexFormatError, match="inconsistent"):
        CloneIndex.load(out)
    rewrite()
    CloneIndex.load(out)  # intact again
    vec = (out / "vectors.npy").read_bytes()
    (out / "vectors.npy").write_bytes(vec[: len(vec) // 2])
    with pytest.raises(IndexFormatError, match="rebuild"):
        CloneIndex.load(out)
    (out / "vectors.npy").write_bytes(vec)
    (out / "ann" / "hnsw.bin").unlink()
    with pytest.raises(IndexFormatError):
        CloneIndex.load(out)


def test_build_refuses_to_clobber_other_directories(tmp_path):
    src = write_tree(tmp_path / "src")
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep")
    with pytest.raises(InputError, match="not a clone index"):
        CloneIndex.build([src], target, encoder=LexicalEncoder(dim=64), index_kind="exact")
    assert (target / "notes.txt").read_text() == "keep"
    with pytest.raises(InputError):
        CloneIndex.build([src], tmp_path / "x", encoder=LexicalEncoder(dim=64), index_kind="annoy")
    with pytest.raises(InputError):
        CloneIndex.build([tmp_path / "nope"], tmp_path / "x", encoder=LexicalEncoder(dim=64))


class Boom(RuntimeError):
    pass


def test_interrupted_runs_leave_previous_index_intact(tmp_path, monkeypatch):
    src, out, store = build(tmp_path, "hnsw")
    listing = sorted(p.name for p in tmp_path.iterdir())
    # a rebuild that dies while embedding
    enc = LexicalEncoder(dim=512)
    monkeypatch.setattr(enc, "encode", lambda *a, **k: (_ for _ in ()).throw(Boom()))
    with pytest.raises(Boom):
        CloneIndex.build([src], out, encoder=enc, index_kind="hnsw")
    # an update that dies while writing the new directory (after the vectors were written)
    (src / "new.py").write_text(NEW)
    import twinspect.code.index_format as store_mod  # the on-disk format (moved out of store)

    real = store_mod.write_json

    def failing_write_json(path, obj, indent=2):
        if Path(path).name == "manifest.json":
            raise Boom()
        return real(path, obj, indent=indent)

    monkeypatch.setattr(store_mod, "write_json", failing_write_json)
    with pytest.raises(Boom):
        CloneIndex.load(out).update()
    monkeypatch.setattr(store_mod, "write_json", real)
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no temporary directories left
    loaded = CloneIndex.load(out)
    assert loaded.fragments == store.fragments
    # a build into a fresh directory that fails leaves nothing behind
    with pytest.raises(Boom):
        CloneIndex.build([src], tmp_path / "fresh", encoder=enc, index_kind="exact")
    assert not (tmp_path / "fresh").exists()


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("sentence_transformers") is None,
    reason="sentence-transformers not installed",
)
@pytest.mark.slow
def test_neural_clone_index(tmp_path):
    from twinspect.code.encoders.neural import NeuralEncoder

    src = write_tree(tmp_path / "src")
    store = CloneIndex.build([src], tmp_path / "idx", encoder=NeuralEncoder(max_tokens=64), index_kind="exact",
                             min_lines=4)
    assert store.vectors.shape == (7, 384)
    loaded = CloneIndex.load(tmp_path / "idx")
    assert loaded.encoder.config()["max_tokens"] == 64
    mean = next(f for f in loaded.fragments if f.name == "mean")
    assert loaded.query(mean, k=1)[0][0].name == "average"


def test_encoder_mismatch_is_detected(tmp_path):
    src, out, _ = build(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["encoder"]["config"]["dim"] = 512  # unchanged: still loads
    manifest["encoder"]["config"]["sublinear_tf"] = False  # but now the stored config disagrees
    (out / "manifest.json").write_text(json.dumps(manifest))
    loaded = CloneIndex.load(out)
    mean = next(f for f in loaded.fragments if f.name == "mean")
    assert loaded.query(mean, k=1)[0][0].name == "average"  # indexed fragment: stored vector reused
    new = extract_fragments(NEW, "new.py", "python", min_lines=4)[0]
    with pytest.raises(IndexFormatError, match="encoder"):
        loaded.query(new, k=1)
    (src / "new.py").write_text(NEW)
    with pytest.raises(IndexFormatError, match="rebuild"):
        loaded.update()
