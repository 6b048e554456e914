"""Copied token runs across syntax (twinspect.code.token_runs), the second source of block fragments."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from twinspect.code.fragments import mine
from twinspect.code.token_runs import match_token_runs, span_lines, token_run_fragments, token_stream

# The tail of ``Reader.close`` and the head of ``Reader.flush`` (lines 9-20) are copied into
# ``Writer`` (lines 10-21): a run that ends one method and starts the next, which no run of whole
# statements holds. Everything around it differs.
READER = textwrap.dedent('''\
    class Reader:
        def __init__(self, source):
            self.source = source
            self.buffer = []

        def close(self):
            if self.source is None:
                return
            self.buffer.clear()
            self.source.close()
            self.source = None
            self.closed = True
            self.listeners = [cb for cb in self.listeners if cb.alive]

        def flush(self, force=False):
            pending = list(self.buffer)
            self.buffer = []
            for item in pending:
                self.deliver(item, force)
            return len(pending)

        def size(self):
            return sum(len(b) for b in self.buffer)
    ''')

WRITER = textwrap.dedent('''\
    class Writer:
        """Writes records."""

        def open(self, target):
            self.source = target
            self.count = 0

        def shutdown(self):
            self.count = 0
            self.buffer.clear()
            self.source.close()
            self.source = None
            self.closed = True
            self.listeners = [cb for cb in self.listeners if cb.alive]

        def flush(self, force=False):
            pending = list(self.buffer)
            self.buffer = []
            for item in pending:
                self.deliver(item, force)
            return len(pending) * 2
    ''')


def test_stream_ignores_comments_layout_and_splits_multiline_strings():
    code = 'def f(x):\n    """Doc line one.\n    Doc line two."""\n    return x  \n'
    s = token_stream(code, "python")
    assert len(s.hashes) == len(s.lines) == len(s.in_string)
    # def f ( x ) : | """Doc line one. -> its words | Doc line two.""" | return x
    assert s.lines.tolist()[:6] == [1] * 6
    assert s.strings == ((2, 3),)
    assert s.in_string[s.lines == 2].all() and s.in_string[s.lines == 3].all()
    assert not s.in_string[s.lines == 4].any()
    # layout does not change the hashes: the same code indented differently streams the same tokens
    other = token_stream("def f(x):\n        return x\n", "python")
    assert token_stream("def f(x):\n    return x\n", "python").hashes.tolist() == other.hashes.tolist()


def test_copy_across_two_methods_is_one_run_pair():
    streams = [token_stream(READER, "python"), token_stream(WRITER, "python")]
    pairs, capped = match_token_runs(streams, min_lines=6, min_tokens=40)
    assert capped == 0
    assert len(pairs) == 1
    a, b = pairs[0]
    assert (a.file, b.file) == (0, 1)
    # from `self.buffer.clear()` in close() to `return len(pending)` in flush(), on both sides
    assert span_lines(streams[0], a) == (9, 20)
    assert span_lines(streams[1], b) == (10, 21)
    # the runs are exactly equal token sequences
    assert streams[0].hashes[a.first:a.last + 1].tolist() == streams[1].hashes[b.first:b.last + 1].tolist()


def test_short_or_docstring_only_copies_are_not_runs():
    streams = [token_stream(READER, "python"), token_stream(WRITER, "python")]
    # the shared run holds ~70 tokens: a 200-token window finds nothing, 13 lines are too many
    assert match_token_runs(streams, min_lines=6, min_tokens=200)[0] == []
    assert match_token_runs(streams, min_lines=13, min_tokens=40)[0] == []
    doc = '"""' + "\n".join(f"Shared documentation line {i} with several words in it." for i in range(12)) + '"""\n'
    a = token_stream("def f():\n    " + doc + "    return 1\n", "python")
    b = token_stream("def g(y):\n    " + doc + "    return y\n", "python")
    assert match_token_runs([a, b], min_lines=6, min_tokens=40, min_t2=1)[0] != []  # the words match
    assert match_token_runs([a, b], min_lines=6, min_tokens=40, min_t2=12)[0] == []  # but it is only a docstring


def test_run_starting_inside_a_docstring_is_widened_to_the_string():
    doc_a = '"""Reader\n\n    ' + "\n    ".join(f"Common text {i} about the copied loop below." for i in range(4)) + '\n    """'
    doc_b = '"""Writer, different first line\n\n    ' + "\n    ".join(
        f"Common text {i} about the copied loop below." for i in range(4)) + '\n    """'
    body = "\n".join(f"    total += values[{i}] * weights[{i}] - offsets[{i}]" for i in range(6))
    a = token_stream(f"def f(values, weights, offsets):\n    {doc_a}\n    total = 0\n{body}\n    return total\n", "python")
    b = token_stream(f"def g(values, weights, offsets):\n    {doc_b}\n    total = 0\n{body}\n    return total\n", "python")
    pairs, _ = match_token_runs([a, b], min_lines=6, min_tokens=40, min_t2=12)
    assert len(pairs) == 1
    ra, rb = pairs[0]
    # the run starts at "Common text 0" (line 4) but the fragment starts where the docstring does
    assert int(a.lines[ra.first]) == 4
    assert span_lines(a, ra)[0] == 2 and span_lines(b, rb)[0] == 2


def test_runs_in_one_file_never_overlap():
    row = "x = compute(alpha, beta, gamma) + adjust(delta)\n"
    s = token_stream(row * 40, "python")  # a periodic file: every window repeats one row later
    pairs, _ = match_token_runs([s], min_lines=6, min_tokens=40)
    assert pairs
    for a, b in pairs:
        assert a.last < b.first


def test_bad_parameters_raise():
    with pytest.raises(ValueError):
        match_token_runs([], min_lines=0)
    with pytest.raises(ValueError):
        match_token_runs([], min_lines=6, min_tokens=0)
    assert match_token_runs([None, token_stream("x = 1\n", "python")], min_lines=6) == ([], 0)


def test_fragments_merge_overlapping_runs_and_respect_skip():
    streams = [token_stream(READER, "python"), token_stream(WRITER, "python")]
    pairs, _ = match_token_runs(streams, min_lines=6, min_tokens=40)
    texts = [READER, WRITER]
    frags, unreadable = token_run_fragments(
        ["reader.py", "writer.py"], ["python", "python"], streams, pairs, lambda i: (texts[i], texts[i]),
        scope=lambda rel, s, e: "")
    assert unreadable == 0
    assert [(f.path, f.start_line, f.end_line, f.name) for f in frags] == [
        ("reader.py", 9, 20, "<module>[lines 9-20]"), ("writer.py", 10, 21, "<module>[lines 10-21]")]
    assert frags[0].text.splitlines()[0].strip() == "self.buffer.clear()"
    # a span that needs no fragment of its own, and a file that changed since it was parsed
    frags, unreadable = token_run_fragments(
        ["reader.py", "writer.py"], ["python", "python"], streams, pairs,
        lambda i: None if i == 1 else (texts[i], texts[i]), skip=lambda rel, s, e: rel == "reader.py")
    assert frags == [] and unreadable == 1
    # two runs of one file that overlap are one region
    doubled = [(pairs[0][0]._replace(last=pairs[0][0].last - 5), pairs[0][1]), pairs[0]]
    frags, _ = token_run_fragments(["reader.py", "writer.py"], ["python", "python"], streams, doubled,
                                   lambda i: (texts[i], texts[i]))
    assert [(f.start_line, f.end_line) for f in frags] == [(9, 20), (10, 21)]


def test_mine_block_granularity_reports_the_cross_method_copy(tmp_path):
    (tmp_path / "reader.py").write_text(READER)
    (tmp_path / "writer.py").write_text(WRITER)
    frags, stats = mine([tmp_path], granularity="block", min_lines=6, quiet=True)
    runs = [f for f in frags if (f.start_line, f.end_line) in ((9, 20), (10, 21))]
    assert sorted((f.path, f.start_line, f.end_line) for f in runs) == [("reader.py", 9, 20), ("writer.py", 10, 21)]
    # named after the class whose methods the region spans
    assert sorted(f.name for f in runs) == ["Reader[lines 9-20]", "Writer[lines 10-21]"]
    assert stats.token_run_fragments == 2
    assert stats.block_fragments >= 2 and stats.fragments == len(frags)
    # the pipeline pairs the two regions (and the function fragments stay as they were)
    import twinspect

    report = twinspect.scan(str(tmp_path), twinspect.DetectConfig(granularity="block", min_lines=6))
    pairs = {tuple(sorted(((report.fragments[p.a].path, report.fragments[p.a].start_line),
                           (report.fragments[p.b].path, report.fragments[p.b].start_line)))) for p in report.pairs}
    assert (("reader.py", 9), ("writer.py", 10)) in pairs
    assert np.isfinite([p.similarity for p in report.pairs]).all()


def test_a_run_is_grown_past_a_capped_window():
    # a 6-line table (C) is pasted in four files; two of them also share the lines around it (P, S).
    # C's windows occur in more than max_occurrences places, so they pair only the first copies (and
    # every later one with the first): the seeds of the P+C+S copy have a gap over C, and the copy is
    # still one run pair of all its lines, not two pieces cut at the table
    table = "".join(f"weights_{k} = table[{k}] * scale + bias[{k}]\n" for k in range(6))
    around = ("def load(path, scale):\n    handle = open(path, 'rb')\n    header = handle.read(16)\n",
              "    handle.close()\n    return checksum(header, weights_5)\n")
    texts = ["first = 1\n" + table + "last = 0\n", "start = 2\n" + table + "stop = 9\n",
             around[0] + textwrap.indent(table, "    ") + around[1]]
    texts.append(texts[2])
    streams = [token_stream(t, "python") for t in texts]
    pairs, capped = match_token_runs(streams, min_lines=1, min_tokens=12, max_occurrences=2, hub_occurrences=1)
    assert capped > 0
    between = [(a, b) for a, b in pairs if (a.file, b.file) == (2, 3)]
    assert len(between) == 1
    a, b = between[0]
    assert span_lines(streams[2], a) == span_lines(streams[3], b) == (1, 11)  # the whole copy
    assert (a.first, a.last, b.first, b.last) == (0, len(streams[2].hashes) - 1, 0, len(streams[3].hashes) - 1)


# Four tests that share a set-up (creating a server and its route): the token matcher finds each two
# copies; with a single neighbour per fragment (SSCD's topN = 1), the stand-in for a set-up pasted in
# more tests than a fragment has neighbours, detection pairs only some of them.
SEARCH_TESTS = '''\
import test from 'ava';
import ky from '../source/index.js';
import {createHttpTestServer} from './helpers/create-http-test-server.js';

test('undefined values delete merged search params', async t => {
	const server = await createHttpTestServer(t);

	server.get('/', (request, response) => {
		response.end(request.url);
	});

	const api = ky.create({searchParams: {foo: '1', bar: '2'}});
	const response = await api.get(`${server.url}?foo=from-url&bar=from-url&keep=1`, {
		searchParams: {foo: undefined, bar: undefined},
	});

	const url = new URL(await response.text(), server.url);
	t.false(url.searchParams.has('foo'));
	t.false(url.searchParams.has('bar'));
	t.is(url.searchParams.get('keep'), '1');
});

test('string search params keep duplicates', async t => {
	const server = await createHttpTestServer(t);

	server.get('/', (request, response) => {
		response.end(request.url);
	});

	const api = ky.create({searchParams: new URLSearchParams({filter: 'active'})});
	const response = await api.get(`${server.url}?filter=old&sort=old`, {
		searchParams: 'filter=recent&sort=new',
	});

	const url = new URL(await response.text(), server.url);
	t.deepEqual(url.searchParams.getAll('filter').sort(), ['active', 'old', 'recent']);
	t.deepEqual(url.searchParams.getAll('sort').sort(), ['new', 'old']);
});

test('an init hook deletes merged search params', async t => {
	const server = await createHttpTestServer(t);

	server.get('/', (request, response) => {
		response.end(request.url);
	});

	const api = ky.create({
		searchParams: {foo: '1', bar: '2'},
		hooks: {
			init: [
				options => {
					options.searchParams = {foo: undefined, baz: '3'};
				},
			],
		},
	});

	const response = await api.get(`${server.url}?bar=from-url`);
	const url = new URL(await response.text(), server.url);
	t.false(url.searchParams.has('foo'));
	t.is(url.searchParams.get('bar'), 'from-url');
	t.is(url.searchParams.get('baz'), '3');
});

test('deletions propagate through extended instances', async t => {
	const server = await createHttpTestServer(t);

	server.get('/', (request, response) => {
		response.end(request.url);
	});

	const api = ky.extend({searchParams: {foo: '1'}})
		.extend({searchParams: {bar: '2'}});
	const response = await api.get(`${server.url}?bar=from-url`, {
		searchParams: {foo: undefined},
	});

	const url = new URL(await response.text(), server.url);
	t.false(url.searchParams.has('foo'));
	t.is(url.searchParams.get('bar'), 'from-url');
});
'''

# Two `it` blocks with the same body, back to back: the first copy ends on the line where the second
# starts (`it "..." do`), as jscpd reports such copies (sinatra's reloader_spec.rb has them).
SETTINGS_SPEC = '''\
describe "settings" do
  before do
    @config_path = File.join(tmp_dir, 'config.rb')
    update_file(@config_path) do |f|
      f.write 'set :port, 4567'
    end
  end

  it "reads the port from the settings file" do
    expect(get('/port').body.strip).to eq('4567')
    update_file(@config_path) do |f|
      f.write 'set :port, 8080'
    end
    expect(get('/port').body.strip).to eq('8080')
  end

  it "reads the port again after a reload" do
    expect(get('/port').body.strip).to eq('4567')
    update_file(@config_path) do |f|
      f.write 'set :port, 8080'
    end
    expect(get('/port').body.strip).to eq('8080')
  end

  it "keeps the old port when the file is removed", retry: 3 do
    FileUtils.rm @config_path
    expect(get('/port').body.strip).to eq('4567')
  end
end
'''


def _stated(report) -> set[tuple[int, int]]:
    """Every fragment pair the report states: listed, in one identical group, or across a group pair."""
    import itertools

    out = {(p.a, p.b) for p in report.pairs}
    for g in report.identical_groups:
        out |= set(itertools.combinations(sorted(g["members"]), 2))
    for g in report.group_pairs:
        out |= {(min(a, b), max(a, b)) for a in g["a"] for b in g["b"] if a != b}
    return out


def test_block_granularity_states_every_run_pair_the_detector_left_out(tmp_path):
    import twinspect

    (tmp_path / "search.test.js").write_text(SEARCH_TESTS)
    copies: list = []
    mine([tmp_path], granularity="block", min_lines=6, quiet=True, workers=1, token_copies=copies)
    assert len(copies) == 6  # every two of the four set-ups
    report = twinspect.scan(str(tmp_path), twinspect.DetectConfig(granularity="block", decision="cosine", top_k=1))
    stated, frags = _stated(report), report.fragments

    def holding(path, start, end):
        return [i for i, f in enumerate(frags) if f.path == path and f.start_line <= start and end <= f.end_line]

    for a, b in copies:
        assert any((min(x, y), max(x, y)) in stated for x in holding(*a) for y in holding(*b)), (a, b)
    st = report.stats
    assert st["token_runs_matched"] == 6
    assert st["token_run_pairs"] == 6 - st["token_runs_covered"] > 0  # detection alone left some out
    assert st["fragments"] == len(frags) and st["pairs"] == len(report.pairs)
    # a block fragment (added for a run or mined) holds the file's lines (its first one from where its
    # outermost holder starts: an arrow function's text starts mid-line), and the added pairs are copies
    lines = SEARCH_TESTS.split("\n")
    for f in frags:
        if f.kind == "block":
            first, *rest = f.text.split("\n")
            assert lines[f.start_line - 1].endswith(first) and rest == lines[f.start_line:f.end_line]
    assert sum(st["token_run_pairs_by_type"].values()) == st["token_run_pairs"]
    assert st["token_run_pairs_by_type"]["T4"] == 0


def test_back_to_back_copies_sharing_their_boundary_line_are_paired(tmp_path):
    import twinspect

    (tmp_path / "settings_spec.rb").write_text(SETTINGS_SPEC)
    report = twinspect.scan(str(tmp_path), twinspect.DetectConfig(granularity="block"))
    frags = report.fragments
    spans = {((frags[p.a].start_line, frags[p.a].end_line), (frags[p.b].start_line, frags[p.b].end_line))
             for p in report.pairs}
    # lines 9-17 (from `do` to the next `it`) are a copy of lines 17-25: both keep line 17
    assert ((9, 17), (17, 25)) in spans
    assert report.stats["token_run_pairs"] >= 1


def test_runs_taken_in_chunks_give_the_same_pairs(monkeypatch):
    """The diagonal runs (and their files) become Python ints a chunk at a time: chunks of 3 runs give
    the pairs of one chunk, on real code (the stdlib's email package: copies within and across files)."""
    import sysconfig
    from pathlib import Path

    from twinspect.code import token_runs

    email = Path(sysconfig.get_paths()["stdlib"]) / "email"
    streams = [token_stream(p.read_text(encoding="utf-8"), "python") for p in sorted(email.glob("*.py"))]
    want = match_token_runs(streams, min_lines=4, min_tokens=30)
    assert len(want[0]) >= 5 and any(a.file != b.file for a, b in want[0])
    monkeypatch.setattr(token_runs, "_RUN_CHUNK", 3)
    assert match_token_runs(streams, min_lines=4, min_tokens=30) == want


def test_consume_frees_the_callers_hashes_and_gives_the_same_pairs():
    """consume=True: the same pairs as without it, and the caller's streams keep only what span_lines
    reads (their lines and strings), so their spans are the same (stdlib email package)."""
    import sysconfig
    from pathlib import Path

    email = Path(sysconfig.get_paths()["stdlib"]) / "email"
    streams = [token_stream(p.read_text(encoding="utf-8"), "python") for p in sorted(email.glob("*.py"))]
    want = match_token_runs(streams, min_lines=4, min_tokens=30)
    consumed = list(streams)
    assert match_token_runs(consumed, min_lines=4, min_tokens=30, consume=True) == want
    assert all(len(s.hashes) == 0 and len(s.in_string) == 0 for s in consumed)
    for a, b in want[0]:
        assert span_lines(consumed[a.file], a) == span_lines(streams[a.file], a)
        assert span_lines(consumed[b.file], b) == span_lines(streams[b.file], b)


def test_a_window_across_two_files_is_no_seed():
    """Windows run inside one file: the tail of file 0 followed by the head of file 1 appears whole in
    file 2, but no run pairs file 2 with the two files' junction; file 2's own copy of file 0's tail
    does pair."""
    from twinspect.code.token_runs import TokenStream

    def stream(words):
        h = np.asarray([hash(w) & 0x7FFFFFFFFFFFFFFF for w in words], dtype=np.uint64)
        return TokenStream(hashes=h, lines=np.arange(1, len(h) + 1, dtype=np.int32),
                           in_string=np.zeros(len(h), bool), strings=())

    a = [f"a{i}" for i in range(60)]
    b = [f"b{i}" for i in range(60)]
    c = [f"c{i}" for i in range(30)] + a[40:] + b[:20] + [f"d{i}" for i in range(30)]
    pairs, _ = match_token_runs([stream(a), stream(b), stream(c)], min_lines=1, min_tokens=20)
    # the two 20-token halves are each a run of their own (one with file 0, one with file 1), never one
    # 40-token run across the junction
    assert sorted((x.file, y.file, x.last - x.first + 1) for x, y in pairs) == [(0, 2, 20), (1, 2, 20)]
    pairs, _ = match_token_runs([stream(a), stream(b), stream(c)], min_lines=1, min_tokens=21)
    assert pairs == []
