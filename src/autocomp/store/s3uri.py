"""What an S3 store may ask of its server, decided before the first request: the URI read
(bucket and prefix, refused where it cannot be honoured), the region requests are signed for
(so the client never sends GetBucketLocation), and the line a refused request becomes (the IAM
action, the key and the policy statement that would allow it)."""

from __future__ import annotations

import os
import re
from urllib.parse import urlparse

from autocomp.errors import UsageError
from autocomp.store.storage import DEFAULT_REGION, KEY_ENVS, REGION_ENVS


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/prefix` as (bucket, prefix), refused (one UsageError) where it cannot be
    honoured: credentials in the URI (they belong in the environment, never in a compiled
    pipeline), a bucket name S3 does not accept, a prefix with `.`/`..` or empty segments,
    a query or fragment."""
    parsed = urlparse(uri)
    if parsed.scheme != "s3":
        raise UsageError("store", uri, "must be s3://bucket/prefix")
    if "@" in parsed.netloc or parsed.password is not None:
        raise UsageError(
            "store", "s3://<credentials hidden>@...",
            f"holds credentials: give them as {KEY_ENVS[0]} and {KEY_ENVS[1]} in the environment "
            "(on the cluster: the autocomp-s3 Secret), never in the URI",
        )  # fmt: skip
    bucket = parsed.netloc
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise UsageError(
            "store", uri, "must name a bucket of 3-63 lower-case letters, digits, '.' or '-': "
            "s3://bucket/prefix",
        )  # fmt: skip
    if parsed.query or parsed.fragment or parsed.params:
        raise UsageError("store", uri, "must be s3://bucket/prefix, with no '?', '#' or ';'")
    prefix = parsed.path.strip("/")
    if prefix and any(p in ("", ".", "..") for p in prefix.split("/")):
        raise UsageError("store", uri, "has an empty, '.' or '..' prefix segment; give a plain "
                         "prefix like s3://bucket/team/autocomp")  # fmt: skip
    return bucket, prefix


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def s3_region(host: str) -> str | None:
    """The region requests are signed for: AUTOCOMP_S3_REGION, AWS_REGION or
    AWS_DEFAULT_REGION when set, else us-east-1, except on AWS's own endpoints (None: the
    client asks GetBucketLocation once, which AWS answers for a key holding
    s3:GetBucketLocation). Naming it keeps the client from its GetBucketLocation request,
    a bucket-level call multi-user KFP's keys may not make (docs/cluster.md, The store)."""
    for name in REGION_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    return None if host.endswith(".amazonaws.com") else DEFAULT_REGION


def refusal(bucket: str, prefix: str, action: str, key: str) -> str:
    """What a refused `action` on `key` needs: the statement of an IAM-style policy
    (AWS, MinIO, SeaweedFS's IAM API) that allows it, scoped to the store's prefix."""
    scope = f"{prefix}/*" if prefix else "*"
    if action == "s3:ListBucket":
        statement = (
            f'{{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": '
            f'"arn:aws:s3:::{bucket}", "Condition": {{"StringLike": {{"s3:prefix": '
            f'"{scope}"}}}}}}'
        )
    else:
        statement = (
            f'{{"Effect": "Allow", "Action": "{action}", "Resource": '
            f'"arn:aws:s3:::{bucket}/{scope}"}}'
        )
    return (
        f"these credentials may not {action} on key {key!r}; the policy statement that "
        f"allows it: {statement} (multi-user KFP: a profile's keys hold objects only under "
        f"{bucket}/shared/ and {bucket}/private/<namespace>/: docs/cluster.md, The store)"
    )
