"""`autocomp audit judge`: a second judge's decisions beside the pipeline's (paper A.11).

Both inputs are `autocomp validate` outputs (verdict shards) on the same render folder, the
second made with another VQA model (`--vqa`). With `--check all` a sample passes a judge when
no check failed (a check skipped because an earlier one failed counts as failed); with one
check (`--check attributes`), only the samples that check decided in both runs are compared (run
validate with --all-checks so it decides every image). The comparison
includes the samples the first judge rejected, so Cohen's kappa is not degenerate the way it is
on a curated benchmark whose samples were all accepted.

RUN/judges/<name>.csv   sample_id,family,n,condition,passed,reference_passed
                        (passed: the second judge; reference_passed: the first)
RUN/judges/<name>.json  provenance: both judges' configurations, checks compared, counts
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.audit.collect import _write_csv
from autocomp.errors import UsageError
from autocomp.generation.validate import CHECKS
from autocomp.store.atomic import write_json
from autocomp.store.outputs import check_output
from autocomp.store.shards import read_stage
from autocomp.store.tables import provenance

FAILED = {"fail", "skipped"}


def decisions(path: str | Path, checks: tuple[str, ...]) -> tuple[dict[str, bool], dict, dict]:
    """sample -> passed (over `checks`), sample -> (family, n, condition), the configuration."""
    table, meta = read_stage(path, "verdicts", "verdicts")
    passed: dict[str, bool] = {}
    cells: dict[str, tuple] = {}
    one = len(checks) == 1
    for r in table.to_pylist():
        sid = r["sample_id"]
        cells[sid] = (r["family"], r["n"], r["condition"])
        if one:  # one check: only the samples that check decided (not skipped, not n/a)
            if r["check"] == checks[0] and r["outcome"] in ("pass", "fail"):
                passed[sid] = r["outcome"] == "pass"
            continue
        ok = passed.get(sid, True)
        if r["check"] in checks and r["outcome"] in FAILED:
            ok = False
        passed[sid] = ok
    return passed, cells, meta.get("config") or {}


def judge_stage(
    verdicts: list[str | Path], out: str | Path, name: str | None = None, check: str = "all"
) -> dict[str, Any]:
    """Write judges/<name>.csv comparing verdicts[1] (the second judge) with verdicts[0]."""
    if len(verdicts) != 2:
        raise UsageError(
            "verdicts", [str(v) for v in verdicts], "give exactly two: the pipeline's, then "
            "the second judge's (autocomp validate --vqa <another model> on the same renders)"
        )  # fmt: skip
    if check != "all" and check not in CHECKS:
        raise UsageError("check", check, f"must be all or one of {', '.join(CHECKS)}")
    checks = CHECKS if check == "all" else (check,)
    ours, cells, our_config = decisions(verdicts[0], checks)
    theirs, their_cells, their_config = decisions(verdicts[1], checks)
    shared = set(cells) & set(their_cells)
    common = sorted(set(ours) & set(theirs))
    if not shared:
        raise UsageError(
            "verdicts", [str(v) for v in verdicts], "share no sample; validate the same render "
            "folder with both judges"
        )  # fmt: skip
    if not common:
        raise UsageError(
            "check", check, f"the two runs share {len(shared):,} samples, but on none of them "
            "did both decide this check (it is skipped after an earlier check fails, and n/a "
            "where it does not apply); run validate with --all-checks on both, so every check "
            "decides every image",
        )  # fmt: skip
    name = name or str((their_config.get("vqa") or {}).get("name") or Path(verdicts[1]).name)
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UsageError("name", name, "use letters, digits, '.', '-' and '_' only")
    out = Path(out)
    check_output(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [
        [s, cells[s][0], str(cells[s][1]), cells[s][2], str(theirs[s]).lower(),
         str(ours[s]).lower()]
        for s in common
    ]  # fmt: skip
    _write_csv(
        out / f"{name}.csv",
        ["sample_id", "family", "n", "condition", "passed", "reference_passed"],
        rows,
    )
    summary = {
        "samples": len(common),
        "reference_rejected": sum(not ours[s] for s in common),
        "second_rejected": sum(not theirs[s] for s in common),
        "agreement": sum(ours[s] == theirs[s] for s in common) / len(common),
        "only_in_reference": len(set(cells) - set(their_cells)),
        "only_in_second": len(set(their_cells) - set(cells)),
        "undecided": len(shared) - len(common),  # shared, but the check(s) not decided in both
    }
    document = provenance(
        "judge_decisions",
        checks=list(checks),
        reference={"input": Path(verdicts[0]).name, "config": our_config},
        second={"input": Path(verdicts[1]).name, "config": their_config},
        summary=summary,
    )
    write_json(out / f"{name}.json", document)
    return {"name": name, **summary}
