"""The cron rule of KFP recurring runs: robfig/cron v1.2.0's `cron.Parse` (parser.go, spec.go),
which the API server checks with, on hand-checked specs; the client refuses what it refuses and
the 5-field form (KFP reads it seconds first)."""

from __future__ import annotations

import pytest

from autocomp.errors import UsageError
from autocomp.pipelines.cluster.client import check_schedule
from autocomp.pipelines.cluster.cron import parse


@pytest.mark.parametrize(
    "spec",
    ["0 0 3 * * 1", "0 0 3 * *", "*/5 * * * * *", "0 0 0 1 JAN *", "0 0 0 * * mon-fri",
     "0 0 12 ? * *", "0 30 9 1,15 * *", "0 0 0/6 * * *", "@weekly", "@daily", "@midnight",
     "@hourly", "@monthly", "@yearly", "@annually", "@every 168h", "@every 1h30m",
     "@every 1.5h", "@every 90s"],
)  # fmt: skip
def test_robfig_accepts(spec):
    assert parse(spec) is None


@pytest.mark.parametrize(
    "spec, error",
    [
        ("", "Empty spec string"),
        ("0 3 * *", "Expected 5 to 6 fields, found 4: 0 3 * *"),
        ("0 0 3 * * 1 2026", "Expected 5 to 6 fields, found 7"),
        ("@fortnightly", "Unrecognized descriptor: @fortnightly"),
        ("@every 1x", "Failed to parse duration @every 1x"),
        ("60 * * * * *", "End of range (60) above maximum (59): 60"),
        ("0 0 24 * * *", "End of range (24) above maximum (23): 24"),
        ("0 0 0 0 * *", "Beginning of range (0) below minimum (1): 0"),
        ("0 0 0 1 13 *", "End of range (13) above maximum (12): 13"),
        ("0 0 0 * * 7", "End of range (7) above maximum (6): 7"),
        ("5-1 * * * * *", "Beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * * *", "Step of range should be a positive number: */0"),
        ("1-2-3 * * * * *", "Too many hyphens: 1-2-3"),
        ("1/2/3 * * * * *", "Too many slashes: 1/2/3"),
        ("x * * * * *", "Failed to parse int from x"),
    ],
)
def test_robfig_refuses_with_its_message(spec, error):
    assert error in parse(spec)


def test_the_client_takes_descriptors_and_refuses_the_minute_first_five_fields():
    check_schedule("@weekly", 1, {})
    check_schedule("0 0 3 * * 1", 10, {})
    with pytest.raises(UsageError, match="reads 5 fields as second minute hour day month"):
        check_schedule("0 3 * * 1", 1, {})  # the server accepts it: seconds-first, every day
    with pytest.raises(UsageError, match=r"KFP refuses it \(End of range \(60\)"):
        check_schedule("60 0 3 * * 1", 1, {})
    for concurrency in (0, 11):
        with pytest.raises(UsageError, match="max_concurrency: .*KFP takes 1 to 10"):
            check_schedule("@daily", concurrency, {})
