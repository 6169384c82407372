"""The one table from the library's names for its inputs to what a CLI user types.

Library errors (autocomp.errors.UsageError) name a configuration field or function parameter
(`limit`, `batch_size`, `models`), so a Python caller and a pipeline user read the names they
wrote. The CLI prints the same error with the flag: the default rule is `--` + the name with
`_` as `-` (`batch_size` -> `--batch-size`); FLAGS lists the names the CLI spells otherwise
(`models` -> `--model`), VERB_FLAGS those one verb spells its own way. Only the leading name
is mapped (`input_path row 3 (c-12)` -> `--input row 3 (c-12)`; `caption.engine` ->
`--engine`), and only to a flag the verb has: anything else (a file, a row) is printed as the
library wrote it. A pipeline parameter's error (a ParameterError) reads by verb too:
`autocomp run` maps it to its flag (`count` -> `--count`), while `submit` and `schedule`,
whose user typed `--param count=0`, print the parameter's name.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Collection, Sequence

from autocomp.errors import ParameterError, UsageError

FLAGS: dict[str, str] = {  # library name -> how every verb spells it
    "models": "--model",  # score(models=...), run_local(models=...); repeatable --model
    "settings": "--set",  # a stage config's settings, given as --set key=value
    "input_path": "--input",  # negatives_stage(input_path, ...)
    "images_root": "--images",  # export_study, the fine-tuning stages
    "split_file": "--split",  # finetune.stage.train(split_file=...)
    "package": "--dist",  # a compiled pipeline: <dist>/<pipeline>.yaml
    "params": "--param",  # the pipeline parameters of submit/schedule
    "fmt": "FORMAT",  # import_benchmark(fmt, ...): the positional FORMAT
    "study_dir": "STUDY",  # the audit study folder: the positional STUDY
    "gpu_sizes": "--gpu-size",  # compile_all(gpu_sizes=...); repeatable --gpu-size step=GB
    "tolerations": "--toleration",  # compile_all(tolerations=...); repeatable
    "pull_secrets": "--image-pull-secret",  # compile_all(pull_secrets=...)
    "placement": "--placement",  # compile_all(placement=...)
    "gpu_labels": "--gpu-label",  # compile_all(gpu_labels=...); repeatable GB:KEY=VALUE
    "run_id": "RUN_ID",  # resume(run_id): the positional RUN_ID
    "job_name": "--name",  # submit_package / schedule_package: the run's name
}
VERB_FLAGS: dict[str, dict[str, str]] = {  # verb -> its own spellings, over FLAGS
    "finetune report": {"folders": "--runs"},  # analysis.finetune.write_report(folders, ...)
    "plan": {"models": "--models"},  # capacity.plan(models=...): `--models all` as the issue asks
    "leaderboard": {"stores": "--store"},  # leaderboard.build(stores): a repeatable --store
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")


def flag(verb: str, name: str) -> str:
    """The flag (or positional) `verb` spells the library name `name` with; a name qualified
    by its stage (`caption.engine`) is spelled as its field."""
    field = name.rpartition(".")[2]
    spelled = {**FLAGS, **VERB_FLAGS.get(verb, {})}
    return spelled.get(name) or spelled.get(field) or "--" + field.replace("_", "-")


def cli_what(verb: str, what: str, known: Collection[str]) -> str:
    """`what` as the user of `verb` reads it: its leading library name as the verb's flag,
    where the verb has that flag (`known`: the verb's flags and positional names, verb_names)."""
    match = _NAME.match(what)
    if match is None:
        return what
    spelled = flag(verb, match[0])
    return spelled + what[match.end() :] if spelled in known else what


def cli_message(verb: str, exc: UsageError, known: Collection[str]) -> str:
    """The error line of a UsageError (`what: value: fix`) for `verb`, whose flags and
    positional names are `known`. A pipeline parameter's error in a verb that takes `--param`
    keeps the parameter's name, as the user typed it there (`--param count=0` -> `count`)."""
    what = exc.what
    if not (isinstance(exc, ParameterError) and "--param" in known):
        what = cli_what(verb, what, known)
    what, fix = " ".join(what.split()), " ".join(exc.fix.split())  # one line
    if exc.value is None:  # nothing was given: no Python `None` on the user's screen
        return f"{what}: {fix}"
    return f"{what}: {exc.value!r}: {fix}"


def verb_names(parser: argparse.ArgumentParser, words: Sequence[str]) -> frozenset[str]:
    """The flags and positional names of the verb `words` names (`["score"]`,
    `["audit", "export"]`); a positional by its metavar, else its name in capitals (`STUDY`),
    as the help texts and errors write it."""
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    names: set[str] = set()
    for action in parser._actions:
        if action.option_strings:
            names.update(action.option_strings)
        elif isinstance(action.metavar, str) or action.metavar is None:
            names.add(action.metavar or action.dest.upper())
    return frozenset(names)
