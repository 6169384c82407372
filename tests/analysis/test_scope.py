"""The report never misleads: every table and figure states what it was computed on when that is
not the accepted benchmark (rejected samples kept, fallback Contextual captions, empty input), on
the page, in the LaTeX captions and on the terminal; a clean benchmark carries no such mark."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.load import load_run
from autocomp.analysis.report import build_tables
from autocomp.analysis.scope import Sample, caveat_lines
from autocomp.cli.main import main
from autocomp.protocol.stages import sample_stage

REJECTED = "rejected by validation"
FALLBACK = "fallback captions"
PAPER = ("paper_table5_minimal", "paper_table5_contextual", "paper_table6_n2", "paper_table7")
FIGURES = ("accuracy_vs_n_color", "accuracy_vs_n_position", "gap_minimal", "gap_contextual",
           "context_deltas")  # fmt: skip


def _rewrite(run: Path, change) -> None:
    """Rewrite the run's benchmark.parquet through `change(table) -> table`."""
    path = run / "benchmark.parquet"
    pq.write_table(change(pq.read_table(path)), path)


def _set(table: pa.Table, name: str, values: list) -> pa.Table:
    column = pa.array(values, table.schema.field(name).type)
    return table.set_column(table.schema.get_field_index(name), name, column)


def _own_captions(table: pa.Table) -> pa.Table:
    """Contextual captions of their own (the fixture's are its Minimal ones: fallbacks)."""
    own = [c if k == "minimal" else f"{c} (seen in a kitchen)"
           for c, k in zip(table["caption"].to_pylist(), table["condition"].to_pylist())]  # fmt: skip
    return _set(table, "caption", own)


def _report(run: Path, out: Path, capsys) -> tuple[str, str]:
    assert main(["report", "--run", str(run), "--out", str(out)]) == 0, capsys.readouterr().err
    return (out / "index.html").read_text(), capsys.readouterr().out


def _block(page: str, ident: str) -> str:
    """The page's block of one paper table (title, caveats, table) or one figure."""
    if ident.startswith("paper_"):
        start = page.index(f'<p class=title id="{ident}-title">')
        return page[start : page.index("</table>", start)]
    start = page.index(f'<figure id="fig-{ident}">')
    return page[start : page.index("</figure>", start)]


def _caveats(block: str) -> list[str]:
    return re.findall(r"<p class=caveat>(.*?)</p>", block)


def test_a_clean_benchmark_carries_no_mark(run_dir, tmp_path, capsys):
    run = tmp_path / "clean"
    shutil.copytree(run_dir, run)
    _rewrite(run, _own_captions)
    page, printed = _report(run, tmp_path / "r", capsys)
    assert "Every sample passed validation" in page and "computed on:" not in printed
    for ident in (*PAPER, *FIGURES):
        assert _caveats(_block(page, ident)) == [], ident


def test_rejected_samples_kept_mark_every_table_and_figure(run_dir, tmp_path, capsys):
    run = tmp_path / "rejected"
    shutil.copytree(run_dir, run)
    _rewrite(run, lambda t: _set(_own_captions(t), "accepted", [i // 2 % 2 == 0 for i in
                                                                 range(t.num_rows)]))  # fmt: skip
    page, printed = _report(run, tmp_path / "r", capsys)
    total = pq.read_metadata(run / "benchmark.parquet").num_rows
    assert f"{total // 2:,} of the {total:,} samples in this benchmark were {REJECTED}" in page
    assert f"computed on: {total // 2:,} of the {total:,} samples" in printed
    for ident in ("paper_table5_minimal", "paper_table5_contextual", "paper_table7", *FIGURES[:4]):
        (line,) = _caveats(_block(page, ident))
        assert REJECTED in line and "not on the accepted benchmark" in line, ident
    tex = (tmp_path / "r" / "tables" / "paper_table5_minimal.tex").read_text()
    assert "\\textbf{Caution:}" in tex and REJECTED in tex
    long = page[page.index('<details id="accuracy">') :]
    assert REJECTED in long[: long.index("</details>")]


def test_fallback_captions_are_said_wherever_conditions_are_compared(
    run_dir,
    tmp_path,
    capsys,
):
    page, printed = _report(run_dir, tmp_path / "r", capsys)  # Contextual = Minimal caption
    assert f"All 12 Contextual samples in this benchmark are {FALLBACK}" in page
    assert "computed on: All 12 Contextual samples" in printed
    assert _caveats(_block(page, "paper_table5_minimal")) == []
    for ident in ("paper_table5_contextual", "paper_table6_n2", "paper_table7",
                  "accuracy_vs_n_color", "gap_contextual", "context_deltas"):  # fmt: skip
        (line,) = _caveats(_block(page, ident))
        assert FALLBACK in line and "caption, seed and image of its Minimal twin" in line, ident
    for ident in ("paper_table6_n2", "paper_table7", "accuracy_vs_n_color", "context_deltas"):
        assert "0 by construction" in _caveats(_block(page, ident))[0], ident
    assert _caveats(_block(page, "gap_minimal")) == []
    diversity = page[page.index('<h2 id="caption_diversity">') :]
    assert FALLBACK in diversity[: diversity.index("</table>")]  # Table 17


def test_caption_status_marks_a_fallback_whatever_its_caption(run_dir, tmp_path):
    run = tmp_path / "status"
    shutil.copytree(run_dir, run)

    def mark(table: pa.Table) -> pa.Table:
        table = _own_captions(table)
        status = ["fallback" if i < 4 else "accepted" for i in range(table.num_rows)]
        return table.append_column("caption_status", pa.array(status))

    _rewrite(run, mark)
    scope = build_tables(load_run(run)).scope
    marked = {sid for sid, s in scope.samples.items() if s.fallback}
    rows = pq.read_table(run / "benchmark.parquet").to_pylist()
    assert marked == {r["sample_id"] for r in rows[:4] if r["condition"] == "contextual"}


def test_table6_reads_the_same_on_the_terminal_and_the_page(run_dir, tmp_path, capsys):
    run = tmp_path / "unpaired"
    shutil.copytree(run_dir, run)
    _rewrite(run, lambda t: _set(t, "paired", [False] * t.num_rows))
    page, printed = _report(run, tmp_path / "r", capsys)
    line = ("Table 6 left out: B_paired is empty: no concept has both its Minimal and its "
            "Contextual sample accepted by validation.")  # fmt: skip
    assert f"  {line}\n" in printed and f"<p class=omitted>{line}</p>" in page
    assert "sample scored" not in page and "sample scored" not in printed  # one wording


def test_caveats_count_the_samples_they_cover():
    def s(i: int, condition: str, rejected: bool = False, fallback: bool = False) -> Sample:
        return Sample(f"c{i}", ("color", 2, condition), rejected, fallback)

    assert caveat_lines([]) == ["Computed on no sample: there is nothing to show."]
    assert caveat_lines([s(0, "minimal"), s(0, "contextual")]) == []
    (line,) = caveat_lines([s(0, "minimal", rejected=True), s(1, "minimal")])
    assert line.startswith("1 of the 2 samples here were rejected")
    (line,) = caveat_lines([s(0, "minimal"), s(0, "contextual", fallback=True),
                            s(1, "contextual")], compare=True)  # fmt: skip
    assert line.startswith("1 of the 2 Contextual samples here are fallback captions")
    assert line.endswith("their Contextual - Minimal difference is 0 by construction.")


# ----------------------------------------------------------------------------- Tables 4, 16


@pytest.fixture
def folder_run(run_dir, tmp_path):
    """The run with its benchmark as a published folder: data/ and the concept set."""
    run = tmp_path / "folder"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("benchmark.parquet"))
    (run / "benchmark" / "data").mkdir(parents=True)
    bench = _own_captions(pq.read_table(run_dir / "benchmark.parquet"))
    pq.write_table(bench, run / "benchmark" / "data" / "test-00000-of-00001.parquet")
    concepts = [sample_stage(f, 2, 6, 0, tmp_path / f"{f}.parquet") for f in ("color", "position")]
    pq.write_table(pa.concat_tables(concepts), run / "benchmark" / "concepts.parquet")
    return run


def test_filter_shift_on_nothing_accepted_is_undefined_not_balanced(folder_run, tmp_path, capsys):
    part = folder_run / "benchmark" / "data" / "test-00000-of-00001.parquet"
    table = pq.read_table(part)
    page, _ = _report(folder_run, tmp_path / "accepted", capsys)
    shift = pq.read_table(tmp_path / "accepted" / "tables" / "filter_shift.parquet")
    assert pc.min(shift["label_tv"]).as_py() >= 0  # every sample retained: a real measurement
    pq.write_table(_set(table, "accepted", [False] * table.num_rows), part)
    page, _ = _report(folder_run, tmp_path / "none", capsys)
    shift = pq.read_table(tmp_path / "none" / "tables" / "filter_shift.parquet").to_pylist()
    assert shift and all(r["label_tv"] != r["label_tv"] for r in shift)  # NaN, never 0.0
    section = page[page.index('<h2 id="filter_shift">') :]
    section = section[: section.index("</table>")]
    assert "0.000" not in section and "<td>–</td>" in section
    assert "No sample was accepted" in section and "undefined (–), not 0" in section
