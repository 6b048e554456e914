"""Copied regions inside functions at the default function granularity (twinspect.code.subfunction)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinspect.code.clones import DetectConfig, scan
from twinspect.code.fragments import mine
from twinspect.code.report import summary_line
from twinspect.code.subfunction import candidate_segments, outermost, segment_streams

# A 10-line copied run (parse a settings file) inside two functions that are otherwise different.
PY_A = '''\
def load_config(path, defaults):
    """Read a settings file over the defaults and report what was read."""
    if not isinstance(defaults, dict):
        raise TypeError("defaults must be a dict, got " + type(defaults).__name__)
    missing = [name for name, required in defaults.items() if required is None]
    checked = 0
    while checked < len(missing):
        checked += 1
    result = dict(defaults)
    with open(path) as fh:
        for raw in fh:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            key = key.strip().lower()
            value = value.strip().strip('"')
            if value.isdigit():
                value = int(value)
            result[key] = value
    absent = sorted(name for name in missing if result.get(name) is None)
    if absent:
        raise KeyError("settings missing from " + str(path) + ": " + ", ".join(absent))
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    for name in list(result):
        text = str(result[name])
        if text[-1:].lower() in units and text[:-1].isdigit():
            result[name] = int(text[:-1]) * units[text[-1:].lower()]
        elif text.lower() in ("yes", "true", "on"):
            result[name] = True
        elif text.lower() in ("no", "false", "off"):
            result[name] = False
    aliases = {"dir": "directory", "max": "maximum", "min": "minimum"}
    result.update({long: result.pop(short) for short, long in aliases.items() if short in result})
    print("loaded", len(result), "settings from", path)
    return result
'''

PY_B = '''\
import os
import sys


def publish_settings(path, registry, prefix, verbose=False):
    """Publish a settings file to a registry, then mirror it into the environment."""
    known = set(registry.names())
    stale = [name for name in known if name.startswith(prefix)]
    for name in stale:
        registry.remove(name)
        if verbose:
            sys.stderr.write(f"removed {name}\\n")
    result = {}
    with open(path) as fh:
        for raw in fh:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            key = key.strip().lower()
            value = value.strip().strip('"')
            if value.isdigit():
                value = int(value)
            result[key] = value
    attempts = 0
    while True:
        try:
            registry.lock(timeout=5.0)
            break
        except TimeoutError:
            attempts += 1
            if attempts >= 3:
                raise
    try:
        for key in sorted(result):
            registry.add(prefix + key, result[key])
            os.environ[prefix + key.upper()] = str(result[key])
    finally:
        registry.unlock()
    if verbose:
        sys.stderr.write(f"published {len(result)} settings\\n")
    return len(result)
'''

JS_A = '''\
function summarizeOrders(orders, options) {
  if (!Array.isArray(orders)) {
    throw new TypeError("orders must be an array");
  }
  const since = options && options.since ? Date.parse(options.since) : 0;
  let skipped = 0;
  while (orders.length && Date.parse(orders[0].date) < since) {
    orders = orders.slice(1);
    skipped++;
  }
  const totals = {};
  for (const order of orders) {
    const key = order.customer.trim().toLowerCase();
    if (!totals[key]) {
      totals[key] = { count: 0, amount: 0, last: null };
    }
    totals[key].count += 1;
    totals[key].amount += order.price * order.quantity;
    if (!totals[key].last || order.date > totals[key].last) {
      totals[key].last = order.date;
    }
  }
  const names = Object.keys(totals).sort();
  let best = null;
  for (let i = 0; i < names.length; i++) {
    const t = totals[names[i]];
    if (best === null || t.amount > totals[best].amount) {
      best = names[i];
    }
  }
  switch (options && options.mode) {
    case "best":
      return best;
    case "skipped":
      return skipped;
    default:
      return names.length;
  }
}
'''

JS_B = '''\
async function exportReport(client, range, format) {
  const orders = await client.fetchOrders(range.start, range.end);
  if (orders.length === 0) {
    throw new Error(`no orders between ${range.start} and ${range.end}`);
  }
  const totals = {};
  for (const order of orders) {
    const key = order.customer.trim().toLowerCase();
    if (!totals[key]) {
      totals[key] = { count: 0, amount: 0, last: null };
    }
    totals[key].count += 1;
    totals[key].amount += order.price * order.quantity;
    if (!totals[key].last || order.date > totals[key].last) {
      totals[key].last = order.date;
    }
  }
  const header = ["customer", "orders", "amount"];
  const rows = Object.entries(totals).map(([name, t]) => [name, t.count, t.amount.toFixed(2)]);
  rows.unshift(header);
  let retries = 0;
  let token = await client.session();
  while (!token.valid) {
    if (++retries > 3) {
      throw new Error("could not open an upload session");
    }
    await new Promise((resolve) => setTimeout(resolve, 250 * retries));
    token = await client.session();
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const target = `${format}/${stamp}/report-${range.start}.${format}`;
  client.log(`uploading ${rows.length - 1} rows to ${target}`);
  const body = format === "csv" ? rows.map((r) => r.join(",")).join("\\n") : JSON.stringify(rows, null, 2);
  await client.upload(target, body, { token });
  return rows.length;
}
'''


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _span(frag_text: str, needle_first: str, needle_last: str) -> tuple[int, int]:
    lines = frag_text.splitlines()
    first = next(i for i, line in enumerate(lines) if needle_first in line) + 1
    last = max(i for i, line in enumerate(lines) if needle_last in line) + 1
    return first, last


@pytest.mark.parametrize("names,texts,first,last", [
    (("a.py", "b.py"), (PY_A, PY_B), "with open(path) as fh:", "result[key] = value"),
    (("a.js", "b.js"), (JS_A, JS_B), "for (const order of orders)", "totals[key].last = order.date"),
])
def test_copied_run_inside_two_different_functions_is_reported(tmp_path, names, texts, first, last):
    root = _tree(tmp_path, dict(zip(names, texts)))
    report = scan(root, DetectConfig())
    functions = [f for f in report.fragments if f.kind == "function"]
    assert len(functions) == 2
    # the two functions are not similar as wholes: no function pair
    assert not any(report.fragments[p.a].kind == report.fragments[p.b].kind == "function" for p in report.pairs)
    subs = [p for p in report.pairs if "subfunction" in (report.fragments[p.a].kind, report.fragments[p.b].kind)]
    assert len(subs) == 1
    pair = subs[0]
    fa, fb = report.fragments[pair.a], report.fragments[pair.b]
    assert (fa.path, fb.path) == names and fa.kind == fb.kind == "subfunction"
    # an exact token run, cut to whole lines: T1 unless its first/last line holds tokens outside the
    # run (JavaScript: the ``;`` and ``}`` closing the statement before it; ``const`` of the next one)
    assert (pair.type, pair.similarity) == ("T1", 1.0) if names[0].endswith(".py") else \
        (pair.type, pair.band) == ("T3", "VST3") and pair.similarity == pair.t3_similarity >= 0.9
    # each fragment covers the copied lines (the run may begin a line earlier or later than the block)
    for frag, text in ((fa, texts[0]), (fb, texts[1])):
        s, e = _span(text, first, last)
        assert frag.start_line <= s + 1 and e - 1 <= frag.end_line
        assert frag.loc >= 9
        assert frag.text.splitlines() == text.splitlines()[frag.start_line - 1:frag.end_line]
        assert frag.name.startswith(functions[0].name if frag.path == names[0] else functions[1].name)
    assert report.stats["subfunction_pairs"] == 1 and report.stats["subfunction_fragments"] == 2
    assert report.stats["pairs"] == len(report.pairs)
    assert [sorted((pair.a, pair.b))] in [sorted(c) and [c] for c in report.classes]
    # the JSON report says which fragments are sub-function regions; the summary counts them apart
    doc = report.to_json_dict()
    assert sorted(f["kind"] for f in doc["fragments"]) == ["function", "function", "subfunction", "subfunction"]
    assert "of which 1 between copied regions inside functions (2 sub-function fragments)" in summary_line(report)
    json.dumps(doc)


def test_no_subfunction_reports_function_pairs_only(tmp_path):
    root = _tree(tmp_path, {"a.py": PY_A, "b.py": PY_B})
    report = scan(root, DetectConfig(subfunction=False))
    assert [f.kind for f in report.fragments] == ["function", "function"]
    assert report.pairs == [] and "subfunction_pairs" not in report.stats
    assert "sub-function" not in summary_line(report)


def test_whole_function_clones_get_no_subfunction_pairs(tmp_path):
    # a.py and b.py: the same function (T1), c.py: a renamed copy (T2); d.py holds only the settings loop
    renamed = PY_A.replace("load_config", "read_settings").replace("result", "acc")
    root = _tree(tmp_path, {"a.py": PY_A, "b.py": PY_A, "c.py": renamed, "d.py": PY_B})
    report = scan(root, DetectConfig())
    frags = report.fragments
    by_files = {(frags[p.a].path, frags[p.b].path, frags[p.a].kind, frags[p.b].kind): p.type for p in report.pairs}
    assert by_files[("a.py", "b.py", "function", "function")] == "T1"
    assert by_files[("a.py", "c.py", "function", "function")] == "T2"
    assert by_files[("b.py", "c.py", "function", "function")] == "T2"
    # the copied runs between a, b and c lie inside those function pairs: no sub-function pair repeats them
    assert report.stats["subfunction_runs_covered"] >= 3
    sub = [(frags[p.a], frags[p.b]) for p in report.pairs if "subfunction" in (frags[p.a].kind, frags[p.b].kind)]
    assert sub and all("d.py" in (fa.path, fb.path) for fa, fb in sub)
    # d.py's loop is paired with the loop of each of a, b and c
    assert {fa.path for fa, fb in sub} == {"a.py", "b.py", "c.py"}
    # one class for the loop copies in a, b and d (a's and b's loops are stated through their function pair)
    loops = {i for fa, fb in sub for i, f in enumerate(frags) if f in (fa, fb) and f.path in ("a.py", "b.py")}
    assert any(loops <= set(c) and any(frags[m].path == "d.py" for m in c) for c in report.classes)
    assert sorted(map(sorted, report.classes))[0] == sorted(
        i for i, f in enumerate(frags) if f.kind == "function" and f.path != "d.py")


def test_identical_functions_only_give_no_subfunction_fragment(tmp_path):
    root = _tree(tmp_path, {"a.js": JS_A, "b.js": JS_A, "c.js": JS_A.replace("summarizeOrders", "countBuyers")})
    report = scan(root, DetectConfig())
    assert [f.kind for f in report.fragments] == ["function"] * 3
    assert len(report.pairs) == 3 and report.stats["subfunction_pairs"] == 0
    assert report.stats["subfunction_runs_covered"] == report.stats["subfunction_runs"] >= 1


def _runs(streams, frag_of, min_lines=6):
    from twinspect.code.blocks import default_min_tokens
    from twinspect.code.token_runs import WINDOW_TOKENS, match_token_runs, span_lines

    pairs, _ = match_token_runs(streams, min_lines=min_lines, min_tokens=WINDOW_TOKENS,
                                min_t2=default_min_tokens(min_lines))
    return {tuple(sorted((frag_of[r.file], *span_lines(streams[r.file], r)) for r in pair)) for pair in pairs}


def _interior(frag, start, end):
    """The non-blank lines strictly between ``start`` and ``end`` of a fragment, whitespace removed."""
    lines = frag.code.split("\n")[start + 1 - frag.start_line:end - frag.start_line]
    return [t for t in ("".join(line.split()) for line in lines) if t]


@pytest.mark.parametrize("tree", ["twinspect/code", "twinspect/dl", "twinspect/examples"])
def test_candidate_segments_lose_no_run(tree):
    # the segments (the functions where a copy can be) give every copied run laid out alike that all
    # the functions give; a copy laid out on other lines (a reformatted copy, as in examples/clones/c)
    # only when its two functions share a window of lines laid out alike elsewhere
    root = Path(__file__).resolve().parents[1] / tree
    frags, _ = mine([root], workers=1)
    outer = outermost(frags)
    by_key = {f.key: f for f in frags}
    whole = [segment_streams(frags[i], [(frags[i].start_line, frags[i].end_line)])[0] for i in outer]
    segments = candidate_segments(frags, 6)
    parts = [segment_streams(frags[i], [(first, last)])[0] for i, first, last in segments]
    everything = _runs(whole, [frags[i].key for i in outer])
    same_layout = {r for r in everything if _interior(by_key[r[0][0]], *r[0][1:]) == _interior(by_key[r[1][0]], *r[1][1:])}
    assert same_layout
    assert same_layout <= _runs(parts, [frags[i].key for i, _, _ in segments]) <= everything
    if tree == "twinspect/examples":
        assert everything - same_layout  # str_trim in config.c and strutil.c, one statement per line or not
    lines = sum(last - first + 1 for _, first, last in segments)
    assert lines < 0.5 * sum(frags[i].loc for i in outer)


BACK_TO_BACK = '''\
function palette(scale) {
  const base = [{
    name: "alpha", size: 10 * scale,
    color: "red", border: "solid",
    tags: ["a", "b", "c"],
    enabled: true, weight: 1.5,
    margin: [0, 0, 4, 4],
    padding: { top: 1, left: 2 },
  }, {
    name: "alpha", size: 10 * scale,
    color: "red", border: "solid",
    tags: ["a", "b", "c"],
    enabled: true, weight: 1.5,
    margin: [0, 0, 4, 4],
    padding: { top: 1, left: 2 },
  }, {
    name: "omega", size: 3,
  }];
  return base.filter((entry) => entry.enabled);
}
'''


def test_copies_repeated_back_to_back_keep_their_own_lines(tmp_path):
    # the copy runs from the "{" ending line 2 to the "}, " opening line 9, where the next one starts
    # (its "{"): each side leaves out the shared line 9 and its counterpart (line 2, line 16), so the
    # two sides are the same six lines, a T1 pair (not lines 2-8 against 10-16, one line apart)
    report = scan(_tree(tmp_path, {"p.js": BACK_TO_BACK}), DetectConfig())
    sub = [(report.fragments[p.a], report.fragments[p.b]) for p in report.pairs]
    assert [(a.start_line, a.end_line, b.start_line, b.end_line) for a, b in sub] == [(3, 8, 10, 15)]
    assert all(f.kind == "subfunction" and f.name.startswith("palette[lines ") for pair in sub for f in pair)
    assert [p.type for p in report.pairs] == ["T1"]
    assert sub[0][0].text == sub[0][1].text


# serde's test_suite/tests/test_de.rs (MIT licence), one test function: the last two calls are equal;
# the token run of that copy starts in the call before them (at T2, `Token::SeqEnd` matches
# `Token::TupleStructEnd`), so the run's two sides meet on one line
SERDE_TUPLE_STRUCT = '''\
#[test]
fn test_tuple_struct() {
    test(
        TupleStruct(1, 2, 3),
        &[
            Token::Seq { len: Some(3) },
            Token::I32(1),
            Token::I32(2),
            Token::I32(3),
            Token::SeqEnd,
        ],
    );
    test(
        TupleStruct(1, 2, 3),
        &[
            Token::Seq { len: None },
            Token::I32(1),
            Token::I32(2),
            Token::I32(3),
            Token::SeqEnd,
        ],
    );
    test(
        TupleStruct(1, 2, 3),
        &[
            Token::TupleStruct {
                name: "TupleStruct",
                len: 3,
            },
            Token::I32(1),
            Token::I32(2),
            Token::I32(3),
            Token::TupleStructEnd,
        ],
    );
    test(
        TupleStruct(1, 2, 3),
        &[
            Token::TupleStruct {
                name: "TupleStruct",
                len: 3,
            },
            Token::I32(1),
            Token::I32(2),
            Token::I32(3),
            Token::TupleStructEnd,
        ],
    );
}
'''


def test_back_to_back_copies_are_stated_line_for_line(tmp_path):
    import re

    report = scan(_tree(tmp_path, {"test_de.rs": SERDE_TUPLE_STRUCT}), DetectConfig())
    lines = SERDE_TUPLE_STRUCT.split("\n")

    def shape(i: int) -> str:  # a line with every word as one placeholder (T2 at line level)
        return re.sub(r"\s+", "", re.sub(r"\w+", "w", lines[i - 1]))

    sub = [(report.fragments[p.a], report.fragments[p.b]) for p in report.pairs
           if report.fragments[p.a].kind == "subfunction"]
    assert sub
    for a, b in sub:
        assert a.end_line < b.start_line and a.end_line - a.start_line == b.end_line - b.start_line >= 5
        assert [shape(i) for i in range(a.start_line, a.end_line + 1)] == \
            [shape(i) for i in range(b.start_line, b.end_line + 1)]


def test_copies_inside_one_function_of_a_large_identical_group_are_reported(tmp_path):
    # 21 files whose functions differ in one literal: one T2 identical group (more than max_bucket_pairs
    # members), which states every pair of two of them, never a function with itself: each file's own
    # back-to-back copy is still reported (its tokens are the file's own: no window is capped)
    files = {f"p{i:02d}.js": BACK_TO_BACK.replace('"alpha"', f'"alpha{i}"') for i in range(21)}
    report = scan(_tree(tmp_path, files), DetectConfig())
    assert [len(g["members"]) for g in report.identical_groups] == [21]
    sub = [(report.fragments[p.a], report.fragments[p.b]) for p in report.pairs
           if "subfunction" in (report.fragments[p.a].kind, report.fragments[p.b].kind)]
    assert len(sub) == 21 and all(a.path == b.path for a, b in sub)


# Two tests of ky's test/retry.ts (MIT licence): the same setup, then a call kept on one line in the
# first and broken over two in the second; the copy runs on through ``retry: {`` and ``limit:``.
KY_RETRY = """\
test('retry options ignore undefined overrides and keep defaults', async t => {
	let requestCount = 0;

	const server = await createHttpTestServer(t);
	server.get('/', (_request, response) => {
		requestCount++;
		response.sendStatus(500);
	});

	await t.throwsAsync(ky(server.url, {
		retry: {
			limit: undefined,
		},
	}).text(), {message: /Internal Server Error/});

	// Default limit is 2, so request should be attempted 3 times
	t.is(requestCount, defaultRetryCount + 1);
});

test('shouldRetry: returns false - prevents retry', async t => {
	let requestCount = 0;

	const server = await createHttpTestServer(t);
	server.get('/', (_request, response) => {
		requestCount++;
		response.sendStatus(500); // Normally retriable
	});

	await t.throwsAsync(
		ky(server.url, {
			retry: {
				limit: 3,
				shouldRetry: () => false, // Prevent all retries
			},
		}).text(),
		{
			message: /Internal Server Error/,
		},
	);

	t.is(requestCount, 1); // No retries
});
"""


# Two tests of ky's test/main.ts (MIT licence): the object literal passed to ``ky.create`` is on one
# line in the first, over several in the second.
KY_MAIN = """\
test('deletes merged search params even when all additions are removed by undefined', async t => {
	const server = await createHttpTestServer(t);

	server.get('/', (request, response) => {
		response.end(request.url);
	});

	const api = ky.create({searchParams: {foo: '1', bar: '2'}});
	const response = await api.get(`${server.url}?foo=from-url&bar=from-url&keep=1`, {
		// @ts-expect-error - testing undefined value
		searchParams: {foo: undefined, bar: undefined},
	});

	const url = new URL(await response.text(), server.url);
	t.false(url.searchParams.has('foo'));
	t.false(url.searchParams.has('bar'));
	t.is(url.searchParams.get('keep'), '1');
});

test('init hook can delete merged search params via undefined', async t => {
	const server = await createHttpTestServer(t);

	server.get('/', (request, response) => {
		response.end(request.url);
	});

	const api = ky.create({
		searchParams: {foo: '1', bar: '2'},
		hooks: {
			init: [
				options => {
					// @ts-expect-error - testing undefined value
					options.searchParams = {foo: undefined, baz: '3'};
				},
			],
		},
	});

	const response = await api.get(`${server.url}?bar=from-url`);
	const url = new URL(await response.text(), server.url);

	t.false(url.searchParams.has('foo'));
	t.is(url.searchParams.get('bar'), 'from-url'); // Input URL overrides instance default
	t.is(url.searchParams.get('baz'), '3'); // Added by init hook
});
"""


@pytest.mark.parametrize("text,spans", [(KY_RETRY, (1, 12, 20, 32)), (KY_MAIN, (1, 8, 20, 28))])
def test_copy_laid_out_on_other_lines_is_found_to_its_end(tmp_path, text, spans):
    # the two functions share a window of lines laid out alike (the server setup); the copy runs on
    # where the layout differs (``limit:`` and ``searchParams: {foo: '1', bar: '2'}`` are still copied).
    # A strict T3 floor keeps the two functions from being a function pair, as in ky's tree, where
    # neither is among the other's nearest neighbours
    report = scan(_tree(tmp_path, {"t.ts": text}), DetectConfig(lexical_min_t3=0.95))
    frags = report.fragments
    assert [(frags[p.a].start_line, frags[p.a].end_line, frags[p.b].start_line, frags[p.b].end_line)
            for p in report.pairs] == [spans]
    assert all(frags[i].kind == "subfunction" for p in report.pairs for i in (p.a, p.b))
