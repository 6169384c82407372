"""Whether a run fits its store (storecap.py): the capacity plan's bytes against KFP's own 20Gi
volume or a declared room, refused before anything is sent."""

from __future__ import annotations

import pytest

from autocomp.errors import UsageError
from autocomp.pipelines.cluster.storecap import (
    KFP_STORE_BYTES,
    check_store_room,
    parse_size,
    planned_bytes,
)

KFP_STORE = "s3://mlpipeline/shared/autocomp"


def test_sizes_as_kubernetes_writes_them():
    assert parse_size("2Ti") == 2 * 2**40 and parse_size("20Gi") == KFP_STORE_BYTES
    assert parse_size("800GB") == 800e9 and parse_size("1.5T") == 1.5e12
    assert parse_size("21474836480") == 20 * 2**30
    for bad in ("", "lots", "-1Gi", "0", "2 Tix", "²Gi"):
        with pytest.raises(UsageError, match="size like 2Ti"):
            parse_size(bad)


def test_the_plan_at_the_pipeline_default_does_not_fit_kfps_own_store():
    need, parts = planned_bytes("generate_benchmark", {"count": 1000, "store": KFP_STORE})
    assert 70e9 < need < 80e9 and parts["work/render (images, shard tables)"] > 50e9
    with pytest.raises(UsageError) as info:
        check_store_room("generate_benchmark", {"count": 1000, "store": KFP_STORE})
    text = str(info.value)
    assert "74.2 GB planned" in text and "21.5 GB" in text and "20Gi" in text, text
    assert "bucket of your own" in text and "\n" not in text
    # a smoke run fits; a declared room replaces the 20Gi; a bucket of unknown room is a note
    assert "room 21.5 GB" in check_store_room("generate_benchmark", {"count": 50,
                                                                     "store": KFP_STORE})  # fmt: skip
    assert "room 2.2 TB" in check_store_room(
        "generate_benchmark", {"count": 1000, "store": "s3://runs/autocomp"}, "2Ti"
    )
    with pytest.raises(UsageError, match="cannot hold"):
        check_store_room("generate_benchmark", {"count": 1000, "store": "s3://r/a"}, "10Gi")
    notes: list[str] = []
    said = check_store_room("generate_benchmark", {"count": 1000, "store": "s3://r/a"},
                            None, notes.append)  # fmt: skip
    assert notes == [said] and "--store-capacity" in said
    # the evaluation leaves only its runs; the specs given replace the profile's
    assert planned_bytes("evaluate_models", {"store": KFP_STORE})[0] < 5e9
    one = planned_bytes("generate_benchmark", {"count": 1000, "specs": "color:2"})[0]
    assert one < need / 3


def test_submit_refuses_a_run_that_cannot_fit_before_any_request(dist_for, capsys):
    from autocomp.cli.main import main

    dist = dist_for()
    run = ["submit", "--host", "http://127.0.0.1:9", "--dist", str(dist), "--pipeline",
           "generate_benchmark", "--name", "r", "--param", "name=r"]  # fmt: skip
    assert main(run) == 2  # nothing listens on :9: the refusal comes first
    err = capsys.readouterr().err
    assert "cannot hold this run" in err and len(err.strip().splitlines()) == 1
    assert main([*run, "--store-capacity", "lots"]) == 2
    assert "--store-capacity: 'lots': must be a size like 2Ti" in capsys.readouterr().err
