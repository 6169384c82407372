"""How each step's cluster settings reach the compiled YAML: retry windows that outlast every
attempt (Argo measures backoff.maxDuration from the first attempt's start and stops retries at
its end), GPU sizes whose label thresholds admit the real cards of that size and no smaller one,
the generation steps placed by their models, GPU sizes and tolerations chosen at compile time."""

from __future__ import annotations

import math

import pytest
import yaml

from autocomp.errors import UsageError
from autocomp.pipelines.cluster import resources as r
from autocomp.pipelines.compile import PIPELINES


def _docs(folder, name: str) -> list[dict]:
    return list(yaml.safe_load_all((folder / f"{name}.yaml").read_text()))


def _tasks(spec: dict) -> dict[str, dict]:
    found = dict(spec["root"]["dag"]["tasks"])
    for component in spec["components"].values():
        found.update(component.get("dag", {}).get("tasks", {}))
    return found


# each compiled task with retries -> its STEPS entry (a score step: SCORE_TIMEOUT)
STEP_OF = {"caption": "caption", "render": "render", "validate": "validate", "publish": "publish",
           "fetch": "fetch", "train": "finetune_train", "score-finetuned": "finetune_score",
           "score-pretrained": "finetune_score"}  # fmt: skip


def _worst_case_fits(retries: int, timeout: int, window: int) -> bool:
    """Argo's rule (workflow/controller/operator.go processNodeRetries): the window starts with
    the first attempt; a retry is started only if its backoff ends inside it, and runs until the
    window's end. Every attempt waits the queue allowance for a node, runs `timeout`, fails."""
    clock = 0
    for attempt in range(retries + 1):
        if attempt:
            clock += r.RETRY["backoff_s"] * r.RETRY["factor"] ** (attempt - 1)
            if clock > window:
                return False
        clock += r.RETRY["queue_s"] + timeout
        if clock > window:
            return False
    return True


@pytest.mark.slow
def test_every_retry_window_outlasts_all_attempts_of_its_step(dist_for):
    folder = dist_for()
    checked = 0
    for name in PIPELINES:
        spec, platform = _docs(folder, name)
        executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        for key, task in _tasks(spec).items():
            policy = task.get("retryPolicy")
            if not policy or not policy.get("maxRetryCount"):
                continue
            label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
            timeout = int(executors[label]["activeDeadlineSeconds"])  # one attempt's limit
            step = STEP_OF.get(key) or ("finetune_report" if name == "finetune_models" else key)
            if step in r.STEPS:  # at least the step's floor
                assert timeout >= r.seconds(r.STEPS[step]["timeout"]), key
            window = int(policy["backoffMaxDuration"].removesuffix("s"))
            retries = policy["maxRetryCount"]
            assert window > (retries + 1) * r.seconds(timeout), (key, window)
            assert _worst_case_fits(retries, r.seconds(timeout), window), key
            assert not _worst_case_fits(retries, r.seconds(timeout), 3600), key  # the old one
            factor = policy["backoffFactor"]
            assert factor == int(factor)  # Argo parses the factor with Atoi (2.14+)
            checked += 1
    assert checked >= 12


def test_every_step_with_retries_or_gpus_has_a_timeout():
    for step, spec in r.STEPS.items():
        assert r.seconds(spec["timeout"]) > 0, step
    assert r.retry_window(3, "12h") == 4 * (12 * 3600 + 3600) + 60 + 120 + 240


@pytest.mark.parametrize("tier", r.GPU_TIERS_GB)
def test_each_gpu_size_admits_the_real_cards_of_that_size_and_no_smaller_one(tier):
    floor = r.tier_floor_mib(tier)
    for card, (nominal, mib) in r.GPU_CARDS.items():
        assert (mib >= floor) == (nominal >= tier), (tier, card, mib, floor)
    # and the affinity compiles to that floor: Gt floor-1
    (expression,) = r.gpu_memory_affinity(tier)
    assert int(expression["values"][0]) + 1 == floor and expression["operator"] == "Gt"


def test_a_node_carries_the_size_labels_its_gpus_can_serve():
    assert r.node_tiers(15360) == [16]  # T4
    assert r.node_tiers(46068) == [16, 24, 40, 48]  # L40S
    assert r.node_tiers(81559) == [16, 24, 40, 48, 80]  # H100
    assert r.node_tiers(143771) == list(r.GPU_TIERS_GB)  # H200


def test_every_registered_model_has_a_card_that_holds_it():
    from autocomp.scoring.registry import all_models

    for entry in all_models().values():
        if not entry.gpus:
            continue
        score = r.score_class(entry.gpus, entry.gpu_memory_gb)
        share = entry.gpu_memory_gb / entry.gpus
        cards = [c for c, (_, mib) in r.GPU_CARDS.items() if mib >= r.tier_floor_mib(score.gpu_gb)]
        assert cards, entry.name
        assert all(mib * 2**20 / 1e9 >= share for c, (_, mib) in r.GPU_CARDS.items() if c in cards)
    assert r.score_class(1, 1).name == "1x16gb"  # CLIP ViT-B/16: a T4 takes it
    assert r.score_class(4, 170).name == "4x48gb"  # InternVL3-78B: L40S nodes take it


def test_the_generation_steps_need_what_their_models_need():
    from autocomp.config import PROFILES

    models = r.profile_models(PROFILES["paper"])
    assert r.step_need("caption", models) == 32  # gemma-3-12b-it
    assert r.step_need("render", models) == 40  # sd3.5-large
    assert r.step_need("validate", models) == 4 + 4 + 32  # detector, segmenter, VQA at once
    assert r.step_need("render", {**models, "renderer": "flux-dev"}) == 48
    assert r.step_need("sample", models) is None
    assert {s: r.tier_for(r.step_need(s, models)) for s in ("caption", "render", "validate")} == {
        "caption": 40, "render": 40, "validate": 40}  # fmt: skip


@pytest.mark.slow
def test_a_step_can_be_compiled_for_bigger_gpus_and_submit_checks_the_models_fit(dist_for):
    from autocomp.pipelines.cluster.packages import check_placement, compiled_gpu_floor

    default, bigger = dist_for(), dist_for(gpu_sizes={"render": 48})
    for folder, floor in ((default, r.tier_floor_mib(40)), (bigger, r.tier_floor_mib(48))):
        docs = _docs(folder, "generate_benchmark")
        executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        assert compiled_gpu_floor(executors["exec-render"]) == floor
        assert compiled_gpu_floor(executors["exec-caption"]) == r.tier_floor_mib(40)
    flux = {"name": "x", "renderer": "flux-dev"}
    with pytest.raises(UsageError, match=r"autocomp compile --gpu-size render=48"):
        check_placement("generate_benchmark", flux, _docs(default, "generate_benchmark"))
    check_placement("generate_benchmark", flux, _docs(bigger, "generate_benchmark"))
    check_placement("generate_benchmark", {"name": "x", "renderer": "sdxl"},
                    _docs(default, "generate_benchmark"))  # fmt: skip
    with pytest.raises(UsageError, match="^models: 'openclip-eva02-e-14'"):
        check_placement("finetune_models", {"name": "x", "models": ["openclip-eva02-e-14"]},
                        _docs(default, "finetune_models"))  # fmt: skip


def test_gpu_sizes_and_tolerations_are_checked_before_compiling():
    with pytest.raises(UsageError, match="one of caption, render, validate"):
        r.check_gpu_sizes({"publish": 48})
    with pytest.raises(UsageError, match="a GPU size"):
        r.check_gpu_sizes({"render": 50})
    with pytest.raises(UsageError, match="the default models need 40 GB GPUs"):
        r.check_gpu_sizes({"render": 24})
    assert r.parse_toleration("sku=gpu:NoSchedule") == ("sku", "gpu", "NoSchedule")
    assert r.parse_toleration("dedicated") == ("dedicated", "", "")
    with pytest.raises(UsageError, match="key\\[=value\\]\\[:effect\\]"):
        r.parse_toleration("sku=gpu:Sometimes")


@pytest.mark.slow
def test_tolerations_and_pull_secrets_reach_the_steps_they_concern(dist_for):
    folder = dist_for(tolerations=("sku=gpu:NoSchedule",), pull_secrets=("regcred",))
    docs = _docs(folder, "evaluate_models")
    executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    gpu = executors["exec-score-1x16gb"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in gpu  # every effect of that taint
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in gpu
    assert "tolerations" not in executors["exec-report"]  # CPU steps stay off GPU nodes
    labels = docs[0]["deploymentSpec"]["executors"]
    for label in labels:  # every step pulls with the secret
        assert executors[label]["imagePullSecret"][0]["secretName"] == "regcred", label
    assert math.isclose(r.tier_floor_mib(16) * 2**20 / 1e9, 16, rel_tol=1e-4)
