"""GPU placement schemes (`autocomp compile --placement`): how a GPU step's node requirement is
written so that the cluster's scheduler and its autoscaler both understand it. One scheme per
platform, each a label its nodes carry from the platform itself (never one added by hand, which
a replaced node loses and an autoscaler never scales a pool up for), with the values the
provider documents as data:

- gfd: NVIDIA GPU feature discovery's `nvidia.com/gpu.memory` (MiB per GPU; the GPU operator);
  backends without node affinity: autocomp's `autocomp.io/gpu-<N>gb` size labels (today's).
- gke: `cloud.google.com/gke-accelerator`, the accelerator GKE sets on every node of a GPU node
  pool and the cluster autoscaler / node auto-provisioning scale pools for
  (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, "Multiple GPUs" and the
  accelerator table; memory per GPU from https://cloud.google.com/compute/docs/gpus).
- karpenter: `karpenter.k8s.aws/instance-gpu-memory` (MiB per GPU) and `instance-gpu-name`,
  Karpenter's well-known labels (https://karpenter.sh/docs/reference/instance-types/; set from
  EC2's GpuInfo in providers/aws pkg/providers/instancetype/types.go).
- eks: `node.kubernetes.io/instance-type` In the GPU instance types that hold the class (EKS
  managed node groups; the cluster autoscaler builds its node templates with that well-known
  label; types and GPUs: https://aws.amazon.com/ec2/instance-types/#Accelerated_Computing).
- aks: `kubernetes.azure.com/accelerator=nvidia` (set by AKS on GPU node pools) and
  `node.kubernetes.io/instance-type` In the VM sizes that hold the class
  (https://learn.microsoft.com/azure/virtual-machines/sizes/overview, GPU families).
- labels: explicit `--gpu-label GB:KEY=VALUE`, for a cluster whose pools carry labels of its own.

With node affinity (KFP 2.14+) a class may go to every card that holds it (`In`/`Gt`); a
backend with node selectors only takes one value per key: the smallest card that holds the class
(the cheapest), which compile says. A class no card of the scheme holds is compiled unplaced and
recorded (`[autocomp placement ...]` in the description): submit refuses a run that scores it,
doctor names it; it is never left Pending forever."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from autocomp.errors import UsageError

GFD_MEMORY = "nvidia.com/gpu.memory"
TIER_LABEL = "autocomp.io/gpu-{gb}gb"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"  # a Kubernetes well-known label


@dataclass(frozen=True)
class Card:
    """A label value a provider sets: its per-GPU memory (GB, as sold; `mib` where the label
    holds MiB) and the most GPUs one node of it has."""

    value: str
    gb: int
    gpus: int
    mib: int = 0


@dataclass(frozen=True)
class Scheme:
    name: str
    key: str  # the label the placement selects on
    numeric: bool  # the label holds MiB per GPU (Gt), else card values (In)
    cards: tuple[Card, ...]  # empty: any value the cluster has (gfd, labels)
    marks: tuple[str, ...]  # label keys whose presence on a node says the cluster uses it
    fixed: tuple[tuple[str, str], ...] = ()  # labels every GPU node of the scheme carries
    source: str = ""
    exact: bool = False  # cards are machine types with exactly `gpus` GPUs (the fewest first)


# GKE's gke-accelerator values, per-GPU memory, the most GPUs a machine type of it has
GKE_CARDS = (
    Card("nvidia-tesla-p4", 8, 4), Card("nvidia-tesla-t4", 16, 4),
    Card("nvidia-tesla-p100", 16, 4), Card("nvidia-tesla-v100", 16, 8),
    Card("nvidia-l4", 24, 8), Card("nvidia-tesla-a100", 40, 16),
    Card("nvidia-a100-80gb", 80, 8), Card("nvidia-h100-80gb", 80, 8),
    Card("nvidia-h100-mega-80gb", 80, 8), Card("nvidia-h200-141gb", 141, 8),
    Card("nvidia-b200", 180, 8),
)  # fmt: skip
# Karpenter's instance-gpu-name with instance-gpu-memory (MiB per GPU, as EC2 reports it; the
# keys and their units: karpenter.sh docs/concepts/scheduling.md "Well-Known Labels", t4 =
# 16384; L4: 22888 on a g6.xlarge node as Karpenter labels it, not the 23034 once listed here)
KARPENTER_CARDS = (
    Card("t4", 16, 8, 16384), Card("v100", 16, 8, 16384), Card("a10g", 24, 8, 24576),
    Card("l4", 24, 8, 22888), Card("a100", 40, 8, 40960), Card("l40s", 48, 8, 46068),
    Card("a100", 80, 8, 81920), Card("h100", 80, 8, 81559), Card("h200", 141, 8, 144384),
)  # fmt: skip
# EC2 GPU instance types: per-GPU memory, GPUs per instance
EKS_TYPES = (
    Card("g4dn.xlarge", 16, 1), Card("g4dn.2xlarge", 16, 1), Card("g4dn.4xlarge", 16, 1),
    Card("g4dn.8xlarge", 16, 1), Card("g4dn.12xlarge", 16, 4), Card("g4dn.metal", 16, 8),
    Card("p3.2xlarge", 16, 1), Card("p3.8xlarge", 16, 4), Card("p3.16xlarge", 16, 8),
    Card("g5.xlarge", 24, 1), Card("g5.2xlarge", 24, 1), Card("g5.4xlarge", 24, 1),
    Card("g5.8xlarge", 24, 1), Card("g5.12xlarge", 24, 4), Card("g5.48xlarge", 24, 8),
    Card("g6.xlarge", 24, 1), Card("g6.2xlarge", 24, 1), Card("g6.4xlarge", 24, 1),
    Card("g6.8xlarge", 24, 1), Card("g6.12xlarge", 24, 4), Card("g6.48xlarge", 24, 8),
    Card("p4d.24xlarge", 40, 8), Card("g6e.xlarge", 48, 1), Card("g6e.2xlarge", 48, 1),
    Card("g6e.4xlarge", 48, 1), Card("g6e.12xlarge", 48, 4), Card("g6e.48xlarge", 48, 8),
    Card("p4de.24xlarge", 80, 8), Card("p5.48xlarge", 80, 8), Card("p5e.48xlarge", 141, 8),
)  # fmt: skip
# Azure GPU VM sizes (AKS node pools): per-GPU memory, GPUs per VM. The values as AKS labels its
# nodes: `kubernetes.azure.com/accelerator=nvidia` (set by AKS on a GPU node pool's nodes, with
# `accelerator=nvidia`; nodes joined from outside AKS never get it) and the VM size verbatim in
# `node.kubernetes.io/instance-type` (e.g. Standard_NC4as_T4_v3), seen on `kubectl describe node`
# of AKS GPU pools (learn.microsoft.com/azure/aks/use-nvidia-gpu)
AKS_SIZES = (
    Card("Standard_NC4as_T4_v3", 16, 1), Card("Standard_NC8as_T4_v3", 16, 1),
    Card("Standard_NC16as_T4_v3", 16, 1), Card("Standard_NC64as_T4_v3", 16, 4),
    Card("Standard_NV36ads_A10_v5", 24, 1), Card("Standard_NV72ads_A10_v5", 24, 2),
    Card("Standard_ND96asr_v4", 40, 8), Card("Standard_NC24ads_A100_v4", 80, 1),
    Card("Standard_NC48ads_A100_v4", 80, 2), Card("Standard_NC96ads_A100_v4", 80, 4),
    Card("Standard_ND96amsr_A100_v4", 80, 8), Card("Standard_NC40ads_H100_v5", 94, 1),
    Card("Standard_NC80adis_H100_v5", 94, 2), Card("Standard_ND96isr_H100_v5", 80, 8),
)  # fmt: skip

SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("gfd", GFD_MEMORY, True, (), (GFD_MEMORY,),
           source="NVIDIA k8s-device-plugin docs/gpu-feature-discovery (nvidia.com/gpu.memory)"),
    Scheme("gke", "cloud.google.com/gke-accelerator", False, GKE_CARDS,
           ("cloud.google.com/gke-accelerator",),
           source="cloud.google.com/kubernetes-engine/docs/how-to/gpus"),
    Scheme("karpenter", "karpenter.k8s.aws/instance-gpu-memory", True, KARPENTER_CARDS,
           ("karpenter.k8s.aws/instance-gpu-memory",),
           source="karpenter.sh/docs/reference/instance-types"),
    Scheme("eks", INSTANCE_TYPE, False, EKS_TYPES, ("eks.amazonaws.com/nodegroup",),
           source="aws.amazon.com/ec2/instance-types (accelerated computing)", exact=True),
    Scheme("aks", INSTANCE_TYPE, False, AKS_SIZES, ("kubernetes.azure.com/accelerator",),
           fixed=(("kubernetes.azure.com/accelerator", "nvidia"),),
           source="learn.microsoft.com/azure/aks/use-nvidia-gpu", exact=True),
    Scheme("labels", "", False, (), ()),
)}  # fmt: skip
DEFAULT = "gfd"


def tier_floor_mib(gpu_gb: int) -> int:
    """A `gpu_gb` GB class's floor in MiB: its size in GB (10^9 bytes) in MiB, which every card
    of that size reports at least."""
    return (gpu_gb * 10**9) // 2**20


def holding(scheme: Scheme, gpus: int, gpu_gb: int) -> list[Card]:
    """The scheme's cards that hold a class (`gpus` GPUs of at least `gpu_gb` GB), the smallest
    first: machine types by GPU count then memory, accelerators by memory (the tables list the
    cheaper of equals first)."""
    cards = [c for c in scheme.cards if c.gb >= gpu_gb and c.gpus >= gpus]
    return sorted(cards, key=lambda c: (c.gpus, c.gb) if scheme.exact else (c.gb, c.gpus))


@dataclass(frozen=True)
class Placement:
    """What one GPU class is compiled with: node-selector labels and node-affinity match
    expressions (None for both: no card of the scheme holds it)."""

    selector: dict[str, str]
    expressions: list[dict[str, Any]]
    note: str = ""

    @property
    def placed(self) -> bool:
        return bool(self.selector or self.expressions)


def place(
    scheme_name: str,
    gpus: int,
    gpu_gb: int,
    affinity: bool,
    gpu_labels: tuple[tuple[int, str, str], ...] = (),
) -> Placement:
    """The requirement of a class of `gpus` GPUs of at least `gpu_gb` GB under a scheme, with
    node affinity (`affinity`) or node selectors only."""
    scheme = SCHEMES[scheme_name]
    fixed = dict(scheme.fixed)
    if scheme.name == "gfd":
        if affinity:
            floor = tier_floor_mib(gpu_gb)
            return Placement(
                {}, [{"key": GFD_MEMORY, "operator": "Gt", "values": [str(floor - 1)]}]
            )
        return Placement({TIER_LABEL.format(gb=gpu_gb): "true"}, [])
    if scheme.name == "labels":
        fits = sorted((gb, k, v) for gb, k, v in gpu_labels if gb >= gpu_gb)
        if not fits:
            return Placement({}, [], f"no --gpu-label for {gpu_gb} GB or more")
        gb, key, value = fits[0]
        return Placement({key: value}, [])
    cards = holding(scheme, gpus, gpu_gb)
    if not cards:
        return Placement({}, [], f"no {scheme.name} card holds {gpus} GPUs of {gpu_gb} GB")
    if scheme.numeric and affinity:  # Karpenter: any instance with that much per GPU
        expression = {"key": scheme.key, "operator": "Gt",
                      "values": [str(tier_floor_mib(gpu_gb) - 1)]}  # fmt: skip
        return Placement(fixed, [expression])
    if affinity:
        values = sorted({c.value for c in cards})
        return Placement(fixed, [{"key": scheme.key, "operator": "In", "values": values}])
    smallest = cards[0]
    if scheme.numeric:  # Karpenter without affinity: the card's name and its memory
        labels = {"karpenter.k8s.aws/instance-gpu-name": smallest.value,
                  scheme.key: str(smallest.mib)}  # fmt: skip
    else:
        labels = {scheme.key: smallest.value}
    return Placement({**fixed, **labels}, [], f"node selectors only: {smallest.value}")


def parse_gpu_label(text: str) -> tuple[int, str, str]:
    """`GB:KEY=VALUE` (--gpu-label): nodes labelled KEY=VALUE have GPUs of at least GB GB."""
    from autocomp.errors import whole_number
    from autocomp.pipelines.cluster.gpus import GPU_TIERS_GB
    from autocomp.pipelines.cluster.validate import check_label_key, check_label_value

    gb, sep, rest = text.partition(":")
    key, eq, value = rest.partition("=")
    # ASCII digits only: str.isdigit() takes '²', which int() then refuses with a traceback
    if not sep or not eq or whole_number(gb) not in GPU_TIERS_GB:
        raise UsageError("gpu_labels", text, f"give GB:KEY=VALUE with GB one of {GPU_TIERS_GB}, "
                         "e.g. 48:pool=l40s")  # fmt: skip
    check_label_key("gpu_labels", key)
    check_label_value("gpu_labels", value)
    return int(gb), key, value


def check_scheme(name: str, gpu_labels: tuple[tuple[int, str, str], ...]) -> str:
    if name not in SCHEMES:
        raise UsageError("placement", name, f"one of {', '.join(SCHEMES)}")
    if (name == "labels") != bool(gpu_labels):
        raise UsageError("placement", name, "--gpu-label GB:KEY=VALUE goes with --placement "
                         "labels, and --placement labels needs at least one")  # fmt: skip
    return name


# ----------------------------------------------------------------------------- the package

_STAMP = re.compile(r"\s*\[autocomp placement ([a-z]+)(?:; unplaced ([^\]]*))?\]")


def stamp(spec: dict[str, Any], scheme: str, unplaced: list[str]) -> None:
    """Record the scheme and the classes it could not place in the description, before the
    backend's stamp (cluster.backends.stamp keeps its own at the end)."""
    info = spec["pipelineInfo"]
    text = _STAMP.sub("", info.get("description", ""))
    mark = f" [autocomp placement {scheme}" + (f"; unplaced {','.join(unplaced)}]"
                                               if unplaced else "]")  # fmt: skip
    found = text.rfind(" [autocomp backend")
    info["description"] = text[:found] + mark + text[found:] if found >= 0 else text + mark


def stamped(spec: dict[str, Any]) -> tuple[str, list[str]]:
    """(scheme, unplaced classes) a package records; ("gfd", []) for an older package."""
    found = _STAMP.search(spec.get("pipelineInfo", {}).get("description", ""))
    if not found:
        return DEFAULT, []
    return found[1], [c for c in (found[2] or "").split(",") if c]


# ----------------------------------------------------------------------------- nodes


def requirement(config: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """An executor's compiled node requirement: (selector labels, match expressions)."""
    selector = dict(config.get("nodeSelector", {}).get("labels", {}))
    expressions = [e for term in config.get("nodeAffinity", [])
                   for e in term.get("matchExpressions", [])]  # fmt: skip
    return selector, expressions


def unmet(labels: dict[str, str], selector: dict[str, str],
          expressions: list[dict[str, Any]]) -> str | None:  # fmt: skip
    """Why a node with `labels` does not meet a requirement, as the scheduler decides it
    (k8s.io/component-helpers/scheduling/corev1/nodeaffinity: In, NotIn, Exists,
    DoesNotExist, Gt, Lt; a Gt on a value that is not an integer does not match); None: it
    does."""
    for key, value in selector.items():
        if labels.get(key) != value:
            return f"{key}={labels.get(key, 'absent')}, needs {value}"
    for e in expressions:
        key, op, values = str(e.get("key")), e.get("operator"), e.get("values") or []
        have = labels.get(key)
        number, bound = _int(have), _int(values[0]) if values else None
        ok = {
            "In": have in values,
            "NotIn": have not in values,
            "Exists": have is not None,
            "DoesNotExist": have is None,
            "Gt": number is not None and bound is not None and number > bound,
            "Lt": number is not None and bound is not None and number < bound,
        }.get(str(op), False)
        if not ok:
            shown = f"> {values[0]}" if op in ("Gt", "Lt") else f"{op} {', '.join(values)}"
            return f"{key} {have or 'absent'}, needs {shown}"
    return None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and re.fullmatch(r"-?[0-9]{1,18}", text) else None


def detect(nodes: list[dict[str, Any]]) -> list[str]:
    """The schemes a cluster's GPU nodes carry the labels of (most specific first)."""
    gpu = [n for n in nodes if n.get("gpus")]
    order = ("gke", "karpenter", "aks", "eks", "gfd")
    return [s for s in order if gpu and any(
        any(m in n["labels"] for m in SCHEMES[s].marks) for n in gpu)]  # fmt: skip
