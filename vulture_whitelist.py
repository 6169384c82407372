"""Names vulture (`make lint`) reports as unused that are used, by someone it cannot see: a
library reading an attribute we set, a protocol calling a method by name, a registry naming a
class in a string, pytest injecting a fixture. Add a name here only with its reason; dead code
is deleted instead. Checked by `vulture` with pyproject's [tool.vulture] settings."""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# attributes set for a library that reads them
_.allow_tf32  # torch.backends.cuda.matmul (benchmarks/gpu_bench.py)
_.tempdir  # tempfile.tempdir (benchmarks/scale_probe/sitecustomize.py)
_.num_key_value_heads  # a transformers config field (benchmarks/scoring_throughput.py)
_.crop_size  # a transformers image processor setting (benchmarks/scoring_throughput.py)
_.padding_side  # a transformers tokenizer setting (generation/caption.py)
_.chat_template  # a transformers tokenizer's template (tiny/generation.py)
_.text_encoder_type  # groundingdino-py's build_model reads it (generation/gdino_original.py)
_.__qualname__  # KFP names a pipeline function by it (pipelines/definitions/builder.py)
_.__signature__  # KFP reads a pipeline's inputs from it (pipelines/definitions/builder.py)
_.showwarning  # the warnings module calls it (pipelines/local/capture.py)
_.should_exit  # uvicorn's server loop reads it (tests/audit/conftest.py)
_.binary_location  # selenium's ChromeOptions (tests/audit/test_browser.py)

# methods a protocol calls by name
_.readable  # io.RawIOBase (store/transfer.py)
_.seekable
_.tell
_.readinto
_.readall
__getattr__  # a module's lazy attributes (PEP 562: pipelines/, scoring/)

# named in a string: a backend's "module:Class" (scoring/backends.py), a field
# compared by name (pipelines/cluster/recurring.py: same)
VlmScorer
_.no_catchup

# parameters a caller's signature fixes
trace  # __exit__(kind, error, trace)
attention_mask  # transformers' attention-function signature (scoring/generative.py)
dropout
pipeline_resource_name  # kfp.local's execute_single_task (tests/pipelines/test_taskview.py)
pipeline_root
runner
unique_pipeline_id
fail_stack

# pytest fixtures: requested by name or autouse, used for their effect
offline_tiny_cache
fast_lane_loads_no_model
fixture_path
no_kubeconfig
short_deadline
no_hub

# pytest fixtures a test asks for by name without reading them (they patch on setup)
_.tools  # tests/importers/test_harness_order.py: the stand-in tagger
