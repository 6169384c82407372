"""Every value `autocomp compile` writes into the compiled YAML, checked against the grammar the
cluster will apply to it, so that a value the API server, the kubelet or Argo would reject (or
rewrite) is refused before anything is written, with one line:

- Secret names (image pull secrets): a DNS-1123 subdomain, at most 253 characters
  (k8s.io/apimachinery pkg/util/validation/validation.go IsDNS1123Subdomain; a Secret's name is
  validated with it: pkg/apis/core/validation ValidateSecretName -> NameIsDNSSubdomain).
- label keys and taint/toleration keys: a qualified name, `[prefix/]name`, the prefix a DNS-1123
  subdomain, the name at most 63 characters of `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
  (validation.go IsQualifiedName; tolerations: ValidateTolerations -> ValidateLabelName);
  label and toleration values at most 63 of the same characters, or empty (IsValidLabelValue).
- image references: distribution/reference's grammar (reference/regexp.go: a domain of
  `[a-zA-Z0-9-]` components and an optional port, path components `[a-z0-9]+(?:(?:[._]|__|[-]+)
  [a-z0-9]+)*`, a tag `[\\w][\\w.-]{0,127}`, a digest `algorithm:hex`); upper case only in the
  domain, never a space or a line break.
- Argo placeholders: Argo substitutes `{{...}}` in every string of a workflow template
  (workflow/common/util.go SubstituteParams, fasttemplate with `{{` `}}`), and KFP its own
  `{{$...}}`; Argo has no escape for `{{`, so a compiled string may hold only the placeholders
  KFP itself writes (`{{$}}` in an executor's arguments, the run id constants) and any other
  `{{` (from a registry's title, a model name, ...) is refused.
"""

from __future__ import annotations

import re
from typing import Any

from autocomp.errors import UsageError

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_REPOSITORY = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
IMAGE = re.compile(
    rf"{_REPOSITORY}(?::[\w][\w.-]{{0,127}})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{{32,}})?"
)
REGISTRY = re.compile(rf"{_DOMAIN}(?:/{_PATH_COMPONENT})*")


def check_dns_subdomain(what: str, value: str) -> str:
    if len(value) > 253 or not DNS1123_SUBDOMAIN.fullmatch(value):
        raise UsageError(what, value, "not a Kubernetes object name (a DNS-1123 subdomain: "
                         "lowercase letters, digits, '-' and '.', at most 253)")  # fmt: skip
    return value


def check_label_key(what: str, key: str) -> str:
    """A qualified name (label key, taint key)."""
    prefix, slash, name = key.rpartition("/")
    bad = (
        not _NAME.fullmatch(name)
        or len(name) > 63
        or (slash and (not prefix or len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)))
    )
    if bad:
        raise UsageError(what, key, "not a Kubernetes label or taint key ([prefix/]name: the "
                         "prefix a DNS name, one '/', the name at most 63 letters, digits, "
                         "'-', '_', '.')")  # fmt: skip
    return key


def check_label_value(what: str, value: str) -> str:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise UsageError(what, value, "not a Kubernetes label or taint value (at most 63 "
                         "letters, digits, '-', '_', '.', alphanumeric at both ends)")  # fmt: skip
    return value


def check_image(what: str, reference: str) -> str:
    if not IMAGE.fullmatch(reference):
        raise UsageError(what, reference, "not an image reference (registry[:port]/path"
                         "[:tag][@sha256:digest]; the path lowercase, no spaces)")  # fmt: skip
    return reference


def check_registry(what: str, registry: str) -> str:
    """An image registry with its path (AUTOCOMP_IMAGE_REGISTRY), e.g. ghcr.io/me."""
    if not REGISTRY.fullmatch(registry):
        raise UsageError(what, registry, "not an image registry (host[:port]/path, the path "
                         "lowercase, no spaces), e.g. ghcr.io/me")  # fmt: skip
    return registry


_PLACEHOLDER = re.compile(r"\{\{.*?\}\}", re.S)
RUN_ID_CONSTANTS = ("{{$.pipeline_job_uuid}}", "{{workflow.uid}}")


def check_placeholders(docs: list[dict[str, Any]]) -> None:
    """Refuse a compiled document whose strings hold a placeholder KFP did not write there."""
    for path, text in _strings(docs, ()):
        if "{{" not in text:  # fasttemplate starts a placeholder at "{{" only
            continue
        if text in RUN_ID_CONSTANTS:
            continue
        args = len(path) >= 6 and path[1:3] == ("deploymentSpec", "executors") and path[4] in (
            "container",) and path[5] in ("args", "command")  # fmt: skip
        rest = _PLACEHOLDER.sub("", text) if args else text
        if args:  # only KFP's own {{$}} may stand in an executor's arguments
            rest += "".join(m for m in _PLACEHOLDER.findall(text) if m != "{{$}}")
        if "{{" in rest:
            shown = _PLACEHOLDER.search(rest)
            where = ".".join(str(p) for p in path[1:5])
            raise UsageError(
                "registry", shown[0] if shown else rest[:40],
                f"a value that reaches the compiled YAML ({where}) holds '{{{{', which "
                "Argo would substitute; remove it (from the model registry's titles or names)",
            )  # fmt: skip


def _strings(value: Any, path: tuple) -> Any:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))
    elif isinstance(value, str):
        yield path, value
