"""The cron rule of KFP recurring runs: `github.com/robfig/cron` v1.2.0's `cron.Parse`, which
the API server checks a recurring run with (kubeflow/pipelines backend/src/apiserver/server/
api_converter.go:1974 at 2.15.0; go.mod pins robfig/cron v1.2.0) and the ScheduledWorkflow
controller schedules by (crd/controller/scheduledworkflow/util/cron_schedule.go). A port of its
parser.go/spec.go, checking only:

- 6 fields `second minute hour day-of-month month day-of-week`, or 5 (the day of week left out:
  NOT the crontab's minute-first 5 fields), each a comma list of `*`, `?`, N, N-M, with `/step`;
  months JAN-DEC and weekdays SUN-SAT by name, any case;
- descriptors: @yearly @annually @monthly @weekly @daily @midnight @hourly, `@every <duration>`
  (Go's time.ParseDuration: 1h30m, 168h, 1.5h).

`parse` returns the error robfig would give (None: accepted).
"""

from __future__ import annotations

import re

_BOUNDS = [  # (min, max, names) per field: second, minute, hour, dom, month, dow (spec.go)
    (0, 59, {}),
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, {m: i + 1 for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}),
    (0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}),
]  # fmt: skip
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_DURATION = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+")


def _number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not re.fullmatch(r"[-+]?\d+", text):
        raise ValueError(f"Failed to parse int from {text}")
    value = int(text)
    if value < 0:
        raise ValueError(f"Negative number ({value}) not allowed: {text}")
    return value


def _range(expr: str, low: int, high: int, names: dict[str, int]) -> None:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    if low_and_high[0] in ("*", "?"):
        start, end = low, high
    else:
        start = _number(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _number(low_and_high[1], names)
        else:
            raise ValueError(f"Too many hyphens: {expr}")
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], {})
        if len(low_and_high) == 1 and low_and_high[0] not in ("*", "?"):
            end = high  # "N/step" means "N-max/step"
    elif len(range_and_step) > 2:
        raise ValueError(f"Too many slashes: {expr}")
    else:
        step = 1
    if start < low:
        raise ValueError(f"Beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ValueError(f"End of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ValueError(f"Beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ValueError(f"Step of range should be a positive number: {expr}")


def parse(spec: str) -> str | None:
    """robfig/cron v1.2.0 `cron.Parse(spec)`'s error, or None when it accepts `spec`."""
    if not spec:
        return "Empty spec string"
    if spec[0] == "@":
        if spec in DESCRIPTORS:
            return None
        if spec.startswith("@every "):
            duration = spec[len("@every ") :]
            if duration in ("0", "+0", "-0") or _DURATION.fullmatch(duration):
                return None
            return f"Failed to parse duration {spec}: time: invalid duration {duration!r}"
        return f"Unrecognized descriptor: {spec}"
    fields = spec.split()
    if not 5 <= len(fields) <= 6:
        return f"Expected 5 to 6 fields, found {len(fields)}: {spec}"
    try:
        for field, (low, high, names) in zip(fields, _BOUNDS, strict=False):
            for expr in (r for r in field.split(",") if r):
                _range(expr, low, high, names)
    except ValueError as exc:
        return str(exc)
    return None
