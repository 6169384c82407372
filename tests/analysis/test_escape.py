"""Everything that reaches HTML, SVG or LaTeX from data is escaped by one function: a hostile
judge file name, model name, run title or caption cannot inject markup, script or LaTeX."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.escape import escape
from autocomp.analysis.report import report_stage

HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def test_escape_by_hand():
    assert escape('<a href="x">&</a>') == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
    assert escape(None) == ""
    assert escape(r"\input{/etc/passwd} 50% $x$ a_b #1 ~ ^", "latex") == (
        r"\textbackslash{}input\{/etc/passwd\} 50\% \$x\$ a\_b \#1 \textasciitilde{} "
        r"\textasciicircum{}"
    )
    assert escape('judge_agreement_a"><b', "id") == "judge_agreement_a---b"
    with pytest.raises(ValueError):
        escape("x", "markdown")


def test_hostile_run_fields_are_inert_in_html_and_latex(run_dir, tmp_path):
    run = tmp_path / f"run{HOSTILE.replace('/', '_')}"
    shutil.copytree(run_dir, run)
    (run / "judges").mkdir()
    sample = pq.read_table(run / "benchmark.parquet").column("sample_id")[0].as_py()
    (run / "judges" / f"j{HOSTILE.replace('/', '_')}.csv").write_text(
        f"sample_id,passed\n{sample},yes\n"
    )
    record = json.loads((run / "results" / "good" / "run.json").read_text())
    record["entry"].update(weights=HOSTILE, backend=HOSTILE, score="\\input{/etc/passwd}")
    (run / "results" / "good" / "run.json").write_text(json.dumps(record))
    done = report_stage(run, tmp_path / "report", title=HOSTILE)
    page = done["html"].read_text()
    assert "<script" not in page and "<img" not in page  # the page itself has no scripts at all
    assert escape(HOSTILE) in page  # shown, as text
    assert 'id="judge_agreement_j---script-alert' in page
    tex = "".join(t.read_text() for t in (tmp_path / "report" / "tables").glob("*.tex"))
    assert "\\input{" not in tex


def test_a_hostile_model_name_is_drawn_as_text_and_never_reaches_the_page_raw(run_dir, tmp_path):
    """A model folder named with markup: its figures' SVG is well-formed, the page has no raw
    copy of the name (matplotlib draws it as glyphs; every HTML mention is escaped)."""
    import xml.etree.ElementTree as ET

    name = "a<b>&c\"'<script>x()"  # a folder name: no slash
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    for part in (run / "results" / "good" / "predictions").glob("*.parquet"):
        table = pq.read_table(part)
        i = table.schema.get_field_index("model")
        column = [name] * table.num_rows
        pq.write_table(table.set_column(i, "model", pa.array(column, table.schema.field(i).type)),
                       part)  # fmt: skip
    (run / "results" / "good").rename(run / "results" / name)
    done = report_stage(run, tmp_path / "report")
    page = done["html"].read_text()
    assert "<script" not in page and name not in page and escape(name) in page
    svgs = sorted((tmp_path / "report" / "figures").glob("*.svg"))
    assert svgs
    for svg in svgs:
        text = svg.read_text()
        ET.fromstring(text.encode())  # nothing from data broke out of the markup
        assert "<script" not in text and name not in text
