"""The twins that run chapter 1's and chapter 7's trained models in the page.

Always: the export round-trips (payload -> rebuilt attnlab model computes what the
exported model computes), bad arguments raise. With Node.js: the page runtime
(``attnlab/course/twin/nn.js``) gives attnlab's output strings, refusals and attention weights
on every check input. With Chromium: the browser check drives both twins on a page.
Small untrained models keep this fast: the runtime mirrors the equations whatever the
weights are; the chapters' trained models are checked on the built site.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tools/

import attnlab  # noqa: E402
from attnlab.course.ch01_seq2seq.twins import reversal_cases, seq2seq_live_twin  # noqa: E402
from attnlab.course.ch07_transformer.twins import date_cases, date_translator_twin  # noqa: E402
from attnlab.course.twin import CHECKS, JS_DIR  # noqa: E402
from attnlab.course.twin.live import (  # noqa: E402
    MAX_PAGE_BYTES,
    export_model,
    page_weight,
    rebuild_model,
    to_float16,
)
from attnlab.data import DateTask, ReversalTask  # noqa: E402
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig  # noqa: E402

NODE = shutil.which("node")
CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)  # fmt: skip


def _date_model(seed=0, norm_first=True):
    torch.manual_seed(seed)
    dates = DateTask()
    cfg = attnlab.TransformerConfig(
        src_vocab=len(dates.src_vocab), tgt_vocab=len(dates.tgt_vocab), d_model=64,
        n_heads=4, d_ff=128, dropout=0.0, norm_first=norm_first,
    )  # fmt: skip
    return attnlab.Seq2SeqTransformer(cfg).eval(), dates


def _reversal_models(seed=0):
    torch.manual_seed(seed)
    task = ReversalTask(lengths=(3, 24), distinct=True)
    V = len(task.src_vocab)
    kw = dict(d_emb=16, d_hidden=32, style="luong")
    with_attention = Seq2Seq(Seq2SeqConfig(V, V, attention="dot", **kw)).eval()
    without = Seq2Seq(Seq2SeqConfig(V, V, attention=None, **kw)).eval()
    return with_attention, without, task


# ----------------------------------------------------------- export, always
def test_export_round_trips_the_transformer():
    model, dates = _date_model()
    twin = date_translator_twin(model, dates)
    rebuilt = rebuild_model(json.loads(json.dumps(twin.data)))  # through JSON
    assert rebuilt is not model
    for (k, a), (k2, b) in zip(
        model.state_dict().items(), rebuilt.state_dict().items()
    ):
        assert k == k2 and torch.equal(a, b), k
    batch = dates.with_split("test").batch(32, seed=3)
    with torch.no_grad():
        want = model.greedy(batch.src, batch.src_lengths, max_len=12)[0]
        got = rebuilt.greedy(batch.src, batch.src_lengths, max_len=12)[0]
        assert torch.equal(want, got)
        torch.testing.assert_close(
            rebuilt(batch.src, batch.tgt_in, batch.src_lengths),
            model(batch.src, batch.tgt_in, batch.src_lengths),
            rtol=0,
            atol=0,
        )


def test_export_round_trips_both_reversal_models():
    with_attention, without, task = _reversal_models()
    twin = seq2seq_live_twin(with_attention, without, task)
    data = json.loads(json.dumps(twin.data))
    for key, model in (("attention", with_attention), ("no_attention", without)):
        rebuilt = rebuild_model(data["models"][key])
        assert rebuilt.config == model.config
        for text in ("quickbrownfx", "hello", "a"):
            want, got = model.translate(task, text), rebuilt.translate(task, text)
            assert want["text"] == got["text"]
            if want["weights"] is not None:
                assert torch.equal(want["weights"], got["weights"])


def test_references_refuse_what_attnlab_refuses():
    model, dates = _date_model()
    data = date_translator_twin(model, dates).data
    ref = CHECKS["date_translator"].reference
    settings = {"layer": "1", "head": "0"}
    r = ref({"source": "2026-11-22", **settings}, data)
    assert r == {"output": "", "unknown": "",
                 "message": "not a date this task knows: '2026-11-22'"}  # fmt: skip
    assert ref({"source": "", **settings}, data)["message"] == "date: empty input ''"
    ok = ref({"source": "22 November 2026!", **settings}, data)
    assert ok["message"] == "" and ok["unknown"] == "2026!"  # one token, unknown
    # every weight row of a decoded date sums to 1 over the source tokens
    rows = {}
    for k, v in ok.items():
        if k.startswith("w:"):
            i = int(k.split(":")[1])
            rows[i] = rows.get(i, 0.0) + v
    assert rows and all(abs(s - 1) < 1e-5 for s in rows.values())


def test_check_types_enough_inputs_in_every_format():
    dates = [c["source"] for c in date_cases()]
    letters = [c["source"] for c in reversal_cases()]
    assert len(dates) >= 50 and len(letters) >= 50
    fmts = {"numeric": 0, "mdy": 0, "dmy": 0}
    for t in dates[:48]:
        fmts["numeric" if "." in t else "mdy" if "," in t else "dmy"] += 1
    assert min(fmts.values()) >= 5, fmts
    test = DateTask(split="test")
    assert all(
        test.split_of(test.tokenize(t)) == "test" for t in dates[:48]
    )  # held out
    assert "" in dates and "" in letters  # refusals are checked too


def test_bad_arguments_raise():
    model, dates = _date_model()
    with_attention, without, task = _reversal_models()
    with pytest.raises(TypeError, match="Seq2SeqTransformer or Seq2Seq"):
        export_model(torch.nn.Linear(2, 2))
    bahdanau = Seq2Seq(Seq2SeqConfig(30, 30, attention="additive"))
    with pytest.raises(ValueError, match="Luong-style"):
        export_model(bahdanau)
    with pytest.raises(TypeError, match="DateTask"):
        date_translator_twin(model, task)
    with pytest.raises(ValueError, match="attention model first"):
        seq2seq_live_twin(without, with_attention, task)
    with pytest.raises(ValueError, match="at least one example"):
        date_translator_twin(model, dates, examples=[])


def test_page_weight_within_budget():
    model, dates = _date_model()
    with_attention, without, task = _reversal_models()
    date_twin = date_translator_twin(model, dates)
    rev_twin = seq2seq_live_twin(with_attention, without, task)
    assert page_weight(date_twin) <= MAX_PAGE_BYTES
    assert page_weight(rev_twin) <= 2 * MAX_PAGE_BYTES  # two models
    html = date_twin.html()
    assert 'data-twin="date_translator"' in html and 'name="source"' in html
    assert '<input type="text"' in html and "attnlabNN" in html


# ------------------------------------------------- the runtime in Node.js
HARNESS = r"""
global.window = {}; global.atob = (b) => Buffer.from(b, 'base64').toString('binary');
const fs = require('fs');
eval(fs.readFileSync(process.argv[2], 'utf8'));
const N = window.attnlabNN, inp = JSON.parse(fs.readFileSync(0, 'utf8')), d = inp.data;
const res = [];
function tokensOf(ids) { const out = []; for (const i of ids) { if (i === 2) break;
  if (i === 0 || i === 1) continue; out.push(d.tgt_itos[i] || '<unk>'); } return out; }
if (inp.kind === 'repr') { console.log(JSON.stringify(inp.inputs.map(N.repr))); process.exit(0); }
if (inp.kind === 'tok') {
  console.log(JSON.stringify(inp.inputs.map((t) => [N.tasks.date.tokenize(t),
    N.tasks.reversal.tokenize(t), N.pyIntOk(t), N.refusal('date', t, N.tasks.date.tokenize(t))])));
  process.exit(0);
}
if (inp.kind === 'date') {
  const m = N.transformer(N.load(d), d.hp);
  for (const c of inp.inputs) {
    const toks = N.tasks.date.tokenize(c.source), ref = N.refusal('date', c.source, toks);
    if (ref !== null) { res.push({output: '', message: ref}); continue; }
    const r = m.greedy(N.encode(d.src_itos, toks), d.max_len);
    res.push({output: tokensOf(r.ids).join(''), message: '',
              w: r.cross[+c.layer][+c.head].map((row) => Array.from(row))});
  }
} else {
  const task = N.tasks.reversal;
  const a = N.seq2seq(N.load(d.models.attention), d.models.attention.hp);
  const n = N.seq2seq(N.load(d.models.no_attention), d.models.no_attention.hp);
  for (const c of inp.inputs) {
    const toks = task.tokenize(c.source), ref = N.refusal('reversal', c.source, toks);
    if (ref !== null) { res.push({output: '', output_no_attention: '', message: ref}); continue; }
    const ids = N.encode(d.src_itos, toks), ml = toks.length + 2 + d.extra_len;
    const ra = a.greedy(ids, ml), rn = n.greedy(ids, ml), oa = tokensOf(ra.ids);
    res.push({output: oa.join(''), output_no_attention: tokensOf(rn.ids).join(''),
              message: '', w: ra.weights.slice(0, Math.min(oa.length + 1, ra.weights.length))
                              .map((row) => Array.from(row))});
  }
}
console.log(JSON.stringify(res));
"""


def _node(tmp_path, kind, data, inputs):
    script = tmp_path / "harness.js"
    script.write_text(HARNESS)
    res = subprocess.run(
        [NODE, str(script), str(JS_DIR / "nn.js")],
        input=json.dumps({"kind": kind, "data": data, "inputs": inputs}),
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    return json.loads(res.stdout)


def _agree(kind, data, cases, got):
    """(number of cases whose strings differ, largest weight difference)."""
    ref = CHECKS[kind].reference
    bad, worst = [], 0.0
    for case, g in zip(cases, got):
        settings = {"layer": "1", "head": "0", **case}
        want = ref(settings, data)
        keys = [k for k in ("output", "output_no_attention", "message") if k in want]
        if any(g.get(k) != want[k] for k in keys):
            bad.append((case["source"], {k: g.get(k) for k in keys}))
        n_w = sum(k.startswith("w:") for k in want)
        if "w" in g:
            assert n_w == sum(len(r) for r in g["w"]), case
            for i, row in enumerate(g["w"]):
                for j, v in enumerate(row):
                    worst = max(worst, abs(v - want[f"w:{i}:{j}"]))
        else:
            assert n_w == 0, case
    return bad, worst


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_runtime_gives_attnlabs_dates(tmp_path):
    model, dates = _date_model(seed=1)
    data = json.loads(json.dumps(date_translator_twin(model, dates).data))
    cases = [{"layer": "1", "head": "0", **c} for c in date_cases()]
    bad, worst = _agree(
        "date_translator", data, cases, _node(tmp_path, "date", data, cases)
    )
    assert bad == [] and worst < 1e-4, (bad, worst)


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_runtime_gives_attnlabs_post_ln_dates(tmp_path):
    model, dates = _date_model(seed=2, norm_first=False)  # the paper's placement
    data = json.loads(json.dumps(date_translator_twin(model, dates).data))
    cases = [{"layer": "0", "head": "2", **c} for c in date_cases(n=6)]
    bad, worst = _agree(
        "date_translator", data, cases, _node(tmp_path, "date", data, cases)
    )
    assert bad == [] and worst < 1e-4, (bad, worst)


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_runtime_gives_attnlabs_reversals(tmp_path):
    with_attention, without, task = _reversal_models(seed=1)
    data = json.loads(json.dumps(seq2seq_live_twin(with_attention, without, task).data))
    cases = reversal_cases()
    bad, worst = _agree(
        "seq2seq_live", data, cases, _node(tmp_path, "rev", data, cases)
    )
    assert bad == [] and worst < 1e-4, (bad, worst)


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_runtime_writes_pythons_repr(tmp_path):
    texts = ["", "a", "it's", 'say "hi"', "it's \"x\"", "back\\slash", "tab\there",
             "new\nline", "zero\u200bwidth", "nbsp\xa0", "é ١١ 😀", "\x07bell"]  # fmt: skip
    assert _node(tmp_path, "repr", {}, texts) == [repr(t) for t in texts]


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_runtime_tokenizes_and_refuses_as_python(tmp_path):
    texts = ["22 November 2026", "nov 22,2026", "3.05.2011", "1..2", "22.+1.2026",
             "22.1_1.2026", "22.\ufeff11.2026", "a\x1cb", "x\u3000y", "²³ 4",
             "ÉCOLE ß", "", "  ", "2026-11-22", "٣.٠٥.٢٠١١", "Ǆuly 4"]  # fmt: skip
    dates, rev = DateTask(), ReversalTask()
    want = []
    for t in texts:
        try:
            int(t)
            ok = True
        except ValueError:
            ok = False
        try:
            dates.encode(t)
            refusal = None
        except ValueError as err:
            refusal = str(err)
        want.append([dates.tokenize(t), rev.tokenize(t), ok, refusal])
    assert _node(tmp_path, "tok", {}, texts) == want


# ------------------------------------------------------- the page in Chromium
@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_twins_in_chromium_show_attnlabs_outputs(tmp_path, capsys):
    from tools.browser_check import run_twins_only

    model, dates = _date_model()
    with_attention, without, task = _reversal_models()
    twins = [date_translator_twin(model, dates),
             seq2seq_live_twin(with_attention, without, task)]  # fmt: skip
    page = tmp_path / "live.html"
    body = "".join(t.html() for t in twins)
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>")  # fmt: skip
    errors, lines = asyncio.run(run_twins_only(CHROMIUM, page.as_uri(), None))
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert len(lines) == 2, lines
    assert errors == [], "\n".join(errors)
    assert all("one decode" in line for line in lines)


def test_float16_weights_are_the_rounded_model():
    """The website's float16 copy of a model: half the bytes, and rebuilt it is the
    trained model with every weight rounded to float16, nothing else."""
    import base64

    model, _ = _date_model(seed=3)
    full = export_model(model)
    half = to_float16(full)
    assert half["dtype"] == "f16" and to_float16(half) is half
    assert len(base64.b64decode(half["blob"])) * 2 == len(
        base64.b64decode(full["blob"])
    )
    rebuilt = rebuild_model(half)
    for name, t in model.state_dict().items():
        want = t.to(torch.float16).to(torch.float32)
        assert torch.equal(rebuilt.state_dict()[name], want), name
    flat = torch.frombuffer(
        bytearray(base64.b64decode(full["blob"])), dtype=torch.float32
    )
    flat[0] = 1e6  # beyond float16
    too_big = full | {"blob": base64.b64encode(flat.numpy().tobytes()).decode()}
    with pytest.raises(ValueError, match="float16's range"):
        to_float16(too_big)


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_runtime_gives_attnlabs_dates_from_float16_weights(tmp_path):
    """The page widens float16 weights as attnlab does: same dates, same weights."""
    model, dates = _date_model(seed=1)
    data = json.loads(json.dumps(date_translator_twin(model, dates).data))
    data = to_float16(data)
    cases = [{"layer": "1", "head": "0", **c} for c in date_cases(n=12)]
    bad, worst = _agree(
        "date_translator", data, cases, _node(tmp_path, "date", data, cases)
    )
    assert bad == [] and worst < 1e-4, (bad, worst)
