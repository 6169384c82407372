"""The one deadline of every network call autocomp makes (the S3/MinIO store, the KFP API, the
Kubernetes API, image registries): how long one request may wait to connect and for an answer,
and how long a call with its retries may go on. Stated here only; $AUTOCOMP_NETWORK_TIMEOUT
(seconds) overrides it. A server that accepts a connection and never answers ends the call
after at most `read` seconds of silence, and no retry starts once `total` seconds have passed
since the first attempt: a caller says so in one line."""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV = "AUTOCOMP_NETWORK_TIMEOUT"
DEFAULT_S = 60.0  # an answer within a minute, or the call fails
CONNECT_S = 10.0  # at most this to connect (less when the deadline is shorter)


@dataclass(frozen=True)
class Deadline:
    connect: float
    read: float
    total: float

    @property
    def pair(self) -> tuple[float, float]:
        """(connect, read): what the kubernetes and kfp_server_api clients take as
        `_request_timeout`."""
        return self.connect, self.read


def deadline() -> Deadline:
    """The deadline in force ($AUTOCOMP_NETWORK_TIMEOUT, else DEFAULT_S)."""
    from autocomp.errors import UsageError

    raw = os.environ.get(ENV)
    seconds = DEFAULT_S
    if raw:
        try:
            seconds = float(raw)
        except ValueError:
            seconds = -1.0
        if not 0 < seconds < 86400:
            raise UsageError(ENV, raw, "give the network deadline in seconds, e.g. 60")
    return Deadline(min(CONNECT_S, seconds), seconds, seconds)


def urllib3_timeout() -> object:
    """The deadline as a urllib3 Timeout (connect, read)."""
    from urllib3 import Timeout

    found = deadline()
    return Timeout(connect=found.connect, read=found.read)
