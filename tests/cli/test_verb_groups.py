"""`finetune` is a verb group like `audit`; the spellings before it are kept one release, each
with a one-line pointer on stderr to the new one (autocomp.cli.finetune.respell)."""

from __future__ import annotations

import pytest

from autocomp.cli.finetune import OLD_SPELLINGS, SUB_VERBS, respell
from autocomp.cli.main import build_parser, main


def test_every_sub_verb_is_registered_under_finetune():
    parser = build_parser()
    for verb in SUB_VERBS:
        args = parser.parse_args(["finetune", verb, *_required(verb)])
        assert args.verb == "finetune" and args.finetune_verb == verb
    with pytest.raises(SystemExit):  # the group alone names no sub-verb
        parser.parse_args(["finetune"])


def _required(verb: str) -> list[str]:
    return {
        "train": ["--model", "m", "--benchmark", "b", "--negatives", "swap", "--out", "o"],
        "split": ["--benchmark", "b", "--out", "o"],
        "score": ["--model", "m", "--benchmark", "b", "--out", "o"],
        "report": ["--runs", "r", "--out", "o"],
        "local": [],
    }[verb]


@pytest.mark.parametrize("old", sorted(OLD_SPELLINGS))
def test_an_old_verb_is_respelled_with_one_pointer(old):
    new, pointer = respell([old, "--out", "x"])
    assert new == [*OLD_SPELLINGS[old], "--out", "x"]
    assert pointer is not None and "\n" not in pointer
    assert f"`autocomp {old}`" in pointer and f"`autocomp {' '.join(new[:2])}`" in pointer


def test_training_without_the_sub_verb_is_respelled_as_train():
    new, pointer = respell(["finetune", "--model", "tiny-clip"])
    assert new == ["finetune", "train", "--model", "tiny-clip"]
    assert pointer and "finetune train" in pointer


@pytest.mark.parametrize(
    "argv",
    [["finetune", "score", "--model", "m"], ["finetune", "--help"], ["score", "--model", "m"], []],
)
def test_new_spellings_and_other_verbs_pass_unchanged(argv):
    assert respell(argv) == (argv, None)


def test_an_old_spelling_runs_the_new_verb_after_its_pointer(tmp_path, capsys):
    # finetune-report on a folder that does not exist: the new verb's own one-line refusal,
    # with --runs (the report sub-verb's spelling of `folders`) after the pointer
    code = main(["finetune-report", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "o")])
    pointer, error = capsys.readouterr().err.splitlines()
    assert code == 2
    assert "`autocomp finetune report`" in pointer
    assert error.startswith("autocomp finetune report: error: --runs")
    assert not (tmp_path / "o").exists()
