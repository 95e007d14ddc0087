"""The run report as one self-contained HTML file: no network, no CDN (plotly.js is inlined once).

Every number a person reads is in the page's text; the ones the summary also
holds carry ``data-field`` (the summary's key), so that a test can read them
back from the rendered page. Charts are plotly figures.
"""

from __future__ import annotations

import difflib
import html
from typing import Mapping

from lshbloom_udf.report.facts import ReportFacts

# Words of each text shown in a pair, and the fewest consecutive shared words highlighted.
PAIR_WORDS = 300
SHARED_RUN = 3

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px; color: #1d2330; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #dde; }
table { border-collapse: collapse; margin: 8px 0; } td, th { padding: 3px 10px; border-bottom: 1px solid #eef; }
th { text-align: left; color: #556; font-weight: 600; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #667; } .note { background: #fff7e0; padding: 6px 10px; border-left: 3px solid #e0b020; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; margin: 12px 0 20px; }
.pair div.text { white-space: pre-wrap; font: 12px/1.4 ui-monospace, monospace; background: #f7f8fb;
                 padding: 8px; max-height: 260px; overflow: auto; }
mark { background: #ffe28a; }
"""


def render(facts: ReportFacts) -> str:
    """The report page of ``facts``."""
    import plotly.offline

    s = facts.summary
    parts = [
        f"<h1>lshbloom-spark run report</h1><div class='muted'>{_esc(_run_line(s))}</div>",
        *(f"<p class='note'>{_esc(n)}</p>" for n in facts.notes),
        "<h2>Counts</h2>" + _counts(s),
        _similarity(facts), _groups(facts), _clusters(facts), _pairs(facts), _index(s), _seconds(s),
    ]
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>lshbloom-spark run report</title>"
            f"<style>{STYLE}</style><script>{plotly.offline.get_plotlyjs()}</script></head><body>"
            + "\n".join(p for p in parts if p) + "</body></html>")


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def _run_line(s: Mapping) -> str:
    idx = s.get("index", {})
    where = f"input {s['input']} -> output {s['output']}" if s.get("input") else "a deduplicate() run"
    run = f"run {idx['run_id']}" if idx.get("run_id") else "temporary index" if not idx.get("kept") else "kept index"
    return f"{where}; mode {s.get('mode')}; {run}; {s.get('pass')} pass"


def _number(field: str, value, text=None) -> str:
    shown = text if text is not None else (f"{value:,}" if isinstance(value, int) else _esc(value))
    return f"<td class='n' data-field='{field}'>{shown}</td>"


def _counts(s: Mapping) -> str:
    rows = [("documents", "documents", s["documents"]), ("duplicates removed", "duplicates", s["duplicates"]),
            ("duplicate rate", "duplicate_rate", None), ("kept", "kept", s["kept"]),
            ("empty or null text", "empty_documents", s["empty_documents"])]
    if s.get("exact_duplicates") is not None:
        rows.insert(2, ("of them exact copies", "exact_duplicates", s["exact_duplicates"]))
    cells = []
    for label, field, value in rows:
        cell = (_number(field, s["duplicate_rate"], f"{100 * s['duplicate_rate']:.2f}%") if value is None
                else _number(field, value))
        cells.append(f"<tr><th>{label}</th>{cell}</tr>")
    v = s.get("verify") or {}
    if v:
        cells.append(f"<tr><th>flags the pass gave / verification removed</th>"
                     f"{_number('pass_flagged', v['pass_flagged'])}{_number('unflagged', v['unflagged'])}</tr>")
    return "<table>" + "".join(cells) + "</table>"


def _figure(fig, height: int = 320) -> str:
    fig.update_layout(height=height, margin=dict(l=50, r=20, t=30, b=40), template="plotly_white")
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})


def _similarity(facts: ReportFacts) -> str:
    import plotly.graph_objects as go

    if not facts.similarity:
        return ""
    bins = len(next(iter(facts.similarity.values())))
    middles = [(i + 0.5) / bins for i in range(bins)]
    fig = go.Figure([go.Bar(x=middles, y=list(counts), name=measure, width=1 / bins)
                     for measure, counts in facts.similarity.items()])
    fig.update_layout(barmode="stack", xaxis_title="similarity to the kept document", yaxis_title="removed documents",
                      xaxis_range=[0, 1])
    total = sum(sum(c) for c in facts.similarity.values())
    by = ", ".join(f"{m} {sum(c):,}" for m, c in facts.similarity.items())
    return (f"<h2>Similarity of the removed documents</h2><p><span data-field='similarity_total'>{total:,}</span> "
            f"removed documents name their kept document ({_esc(by)}).</p>" + _figure(fig))


def _groups(facts: ReportFacts) -> str:
    import plotly.graph_objects as go

    if not facts.groups:
        return ""
    values = [g.value for g in facts.groups]
    rates = [g.removed / g.documents if g.documents else 0.0 for g in facts.groups]
    fig = go.Figure(go.Bar(x=values, y=rates, text=[f"{100 * r:.1f}%" for r in rates], textposition="outside"))
    fig.update_layout(yaxis_title="duplicate rate", yaxis_tickformat=".0%", xaxis_title=facts.group_column)
    rows = "".join(f"<tr><td>{_esc(g.value)}</td><td class='n'>{g.documents:,}</td><td class='n'>{g.removed:,}</td>"
                   f"<td class='n'>{100 * r:.2f}%</td></tr>" for g, r in zip(facts.groups, rates))
    return (f"<h2>Duplicate rate by {_esc(facts.group_column)}</h2>" + _figure(fig)
            + f"<table><tr><th>{_esc(facts.group_column)}</th><th>documents</th><th>removed</th><th>rate</th></tr>"
            + rows + "</table>")


def _clusters(facts: ReportFacts) -> str:
    if not facts.clusters and not facts.earlier_clusters:
        return ""
    sizes = ((facts.summary.get("verify") or {}).get("clusters") or {}).get("group_sizes", {})
    size_text = ", ".join(f"{k}: {n:,}" for k, n in sizes.items())
    out = "<h2>Largest groups</h2>"
    if size_text:
        out += f"<p>Kept documents of this run by group size (kept + removed): {_esc(size_text)}</p>"
    for title, groups in (("kept document of this run", facts.clusters),
                          ("kept document of an earlier run", facts.earlier_clusters)):
        if groups:
            rows = "".join(f"<tr><td>{_esc(k)}</td><td class='n'>{n:,}</td></tr>" for k, n in groups)
            out += f"<table><tr><th>{title} (duplicate_of)</th><th>removed copies</th></tr>{rows}</table>"
    return out


def highlight(a: str, b: str) -> tuple[str, str]:
    """``a`` and ``b`` (their first PAIR_WORDS words) as HTML, the runs of SHARED_RUN or more words they share
    marked."""
    wa, wb = a.split()[:PAIR_WORDS], b.split()[:PAIR_WORDS]
    marks_a, marks_b = [False] * len(wa), [False] * len(wb)
    for block in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_matching_blocks():
        if block.size >= SHARED_RUN:
            marks_a[block.a:block.a + block.size] = [True] * block.size
            marks_b[block.b:block.b + block.size] = [True] * block.size
    return _marked(wa, marks_a, len(a.split())), _marked(wb, marks_b, len(b.split()))


def _marked(words: list, marks: list, total: int) -> str:
    out: list[str] = []
    run: list[str] = []
    for w, m in zip(words + [""], marks + [None]):
        if run and (m is not True):
            out.append("<mark>" + " ".join(run) + "</mark>")
            run = []
        if m is True:
            run.append(_esc(w))
        elif m is False:
            out.append(_esc(w))
    more = f" <span class='muted'>... ({total - len(words):,} more words)</span>" if total > len(words) else ""
    return " ".join(out) + more


def _pairs(facts: ReportFacts) -> str:
    if not facts.pairs:
        return ""
    blocks = []
    for p in facts.pairs:
        kept = p.kept_text if p.kept_text is not None else ""
        left, right = highlight(p.removed_text, kept)
        if p.kept_text is None:
            right = "<span class='muted'>not in this output (an earlier run's document, or mode duplicates)</span>"
        sim = f"{p.measure} {p.similarity:.3f}" if p.similarity is not None else "unverified"
        blocks.append(f"<div><b>removed {_esc(p.removed_id)}</b> <span class='muted'>duplicate of "
                      f"{_esc(p.kept_id)}, {_esc(sim)}</span></div><div class='pair'><div class='text'>{left}</div>"
                      f"<div class='text'>{right}</div></div>")
    return ("<h2>Removed documents beside their kept document</h2><p class='muted'>Shared runs of "
            f"{SHARED_RUN}+ words are marked; a sample chosen by the hash of the key.</p>" + "".join(blocks))


def _index(s: Mapping) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    gens = (s.get("index") or {}).get("generations")
    if not gens:
        return ""
    names = [f"generation {i}" for i in range(len(gens))]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=names, y=[g["inserted"] / g["capacity"] for g in gens], name="fill"), secondary_y=False)
    fig.add_trace(go.Scatter(x=names, y=[g["false_positive"] for g in gens], name="false-positive rate",
                             mode="lines+markers"), secondary_y=True)
    fig.update_yaxes(title_text="fill (inserted / capacity)", tickformat=".0%", secondary_y=False)
    fig.update_yaxes(title_text="false-positive rate", type="log", secondary_y=True)
    rows = "".join(f"<tr><td>{i}</td><td class='n'>{g['capacity']:,}</td><td class='n'>{g['inserted']:,}</td>"
                   f"<td class='n'>{g['false_positive']:.3g}</td></tr>" for i, g in enumerate(gens))
    idx = s["index"]
    return ("<h2>Index</h2>" + f"<p>{_esc(idx.get('backend'))} filters, "
            f"<span data-field='inserted_total'>{idx.get('inserted_total', 0):,}</span> documents inserted in all, "
            f"false-positive rate now {idx.get('expected_false_positive', 0):.3g} (sized for "
            f"{idx.get('p_effective', 0):.3g}).</p>" + _figure(fig, 280)
            + "<table><tr><th>generation</th><th>capacity</th><th>inserted</th><th>false-positive rate</th></tr>"
            + rows + "</table>")


def _seconds(s: Mapping) -> str:
    import plotly.graph_objects as go

    seconds = {k: v for k, v in (s.get("seconds") or {}).items() if k not in ("total", "job_total")}
    if not seconds:
        return ""
    fig = go.Figure(go.Bar(y=list(seconds), x=list(seconds.values()), orientation="h"))
    fig.update_layout(xaxis_title="seconds", yaxis_autorange="reversed")
    total = (s.get("seconds") or {}).get("job_total", (s.get("seconds") or {}).get("total"))
    return ("<h2>Stage seconds</h2>" + (f"<p>{total:.2f} s in all.</p>" if total is not None else "")
            + _figure(fig, 40 + 24 * len(seconds)))
