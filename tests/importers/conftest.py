"""Small sources in each imported format, built here: release rows and SugarCrepe files with
tiny PNG images."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def png(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (seed * 37 % 256, seed * 91 % 256, 200)).save(buffer, "PNG")
    return buffer.getvalue()


# (objects, colors, handmade caption, llm caption) as the release writes them
COLOR_ROWS = [
    (["Chair", "Cup"], ["red", "blue"],
     "a red chair, and a blue cup on a white background.",
     "A red chair stands beside a blue cup in a sunny kitchen."),
    (["Cookies", "Frame"], ["brown", "gold"],
     "a brown cookies, and a gold frame on a white background.",
     "A plate of brown cookies rests under a gold frame on the wall."),
    (["Chips", "Cup"], ["red", "green"],  # Chips: dropped by our curation
     "a red chips, and a green cup on a white background.",
     "A red chips bag lies by a green cup."),
    (["Lamp", "Bench"], ["white", "red"],  # white: dropped from our colours
     "a white lamp, and a red bench on a white background.",
     "A white lamp glows over a red bench."),
    (["Lamp", "Vase"], ["green", "pink"],
     "a green lamp, and a pink vase on a white background.",
     "A green lamp and a pink vase stand near a green wall."),  # "green" twice: cannot bind
    (["Cup", "Chair"], ["blue", "red"],  # the scene of row 0 again
     "a blue cup, and a red chair on a white background.",
     "A blue cup sits near a red chair."),
    (["Bottle", "Hat", "Book"], ["red", "blue", "green"],
     "a red bottle, a blue hat, and a green book on a white background.",
     "A red bottle, a blue hat and a green book lie on a table."),
    (["Bowl", "Pen"], ["grey", "orange"],
     "a grey bowl, and an orange pen on a white background.",
     "A grey bowl holds an orange pen on a desk."),
]  # fmt: skip
# what the importer must keep: row -> conditions imported
COLOR_KEPT = {0: 2, 1: 2, 4: 1, 6: 2, 7: 2}

POSITION_ROWS = [
    (["Chair", "Desk", "Lamp"], ["above", "to the left of"],
     "A chair is above a desk, which is to the left of a lamp on a white background.",
     "A chair hangs above a desk, which stands to the left of a lamp in the office."),
    (["Clock", "Couch"], ["below"],
     "A clock is below a couch on a white background.",
     "An old clock sits below a leather couch in the attic."),
    (["Toy", "Couch"], ["above"],
     "A toy is above a couch on a white background.",
     "A toy floats above a couch."),
]  # fmt: skip


def release_table(rows: list[tuple], labels: str, images: str = "struct") -> pa.Table:
    """Release rows with the release's own (wrong) negatives beside them."""
    columns: dict[str, list] = {
        "id": [], "num_objects": [], "objects": [], labels: [], "handmade_caption": [],
        "llm_caption": [], "handmade_image": [], "llm_image": [], "swap_negatives": [],
    }  # fmt: skip
    for i, (objects, attrs, handmade, llm) in enumerate(rows):
        columns["id"].append(i + 1)
        columns["num_objects"].append(len(objects))
        columns["objects"].append(objects)
        columns[labels].append(attrs)
        columns["handmade_caption"].append(handmade)
        columns["llm_caption"].append(llm)
        for kind, seed in (("handmade", 2 * i), ("llm", 2 * i + 1)):
            name = f"{kind}/concept_{i + 1:05d}_{kind}.png"
            value = {"bytes": png(seed), "path": name} if images == "struct" else name
            columns[f"{kind}_image"].append(value)
        columns["swap_negatives"].append([handmade, handmade])  # duplicates, no true swap
    image_type = IMAGE if images == "struct" else pa.string()
    schema = pa.schema(
        [
            ("id", pa.int64()), ("num_objects", pa.int64()), ("objects", pa.list_(pa.string())),
            (labels, pa.list_(pa.string())), ("handmade_caption", pa.string()),
            ("llm_caption", pa.string()), ("handmade_image", image_type),
            ("llm_image", image_type), ("swap_negatives", pa.list_(pa.string())),
        ]
    )  # fmt: skip
    return pa.Table.from_pydict(columns, schema)


def write_image_files(rows: list[tuple], root: Path) -> None:
    for i in range(len(rows)):
        for kind, seed in (("handmade", 2 * i), ("llm", 2 * i + 1)):
            path = root / kind / f"concept_{i + 1:05d}_{kind}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(png(seed))


@pytest.fixture
def color_release(tmp_path) -> Path:
    path = tmp_path / "color.parquet"
    pq.write_table(release_table(COLOR_ROWS, "colors"), path)
    return path


@pytest.fixture
def position_release(tmp_path) -> Path:
    folder = tmp_path / "position" / "data"
    folder.mkdir(parents=True)
    table = release_table(POSITION_ROWS, "relations")
    pq.write_table(table.slice(0, 2), folder / "train-00000-of-00002.parquet")
    pq.write_table(table.slice(2), folder / "train-00001-of-00002.parquet")
    return folder.parent


SUGARCREPE = {
    "replace_att": {
        "0": {"filename": "000000000139.jpg", "caption": "A red bus on a street.",
              "negative_caption": "A blue bus on a street."},
        "1": {"filename": "000000000285.jpg", "caption": "A big bear in the grass.",
              "negative_caption": "A small bear in the grass."},
        "2": {"filename": "000000000139.jpg", "caption": "Same words.",
              "negative_caption": "Same words."},
    },
    "swap_obj": {
        "7": {"filename": "000000000632.jpg", "caption": "A cat on a bed next to a dog.",
              "negative_caption": "A dog on a bed next to a cat."},
    },
}  # fmt: skip


@pytest.fixture
def sugarcrepe(tmp_path) -> tuple[Path, Path]:
    """(folder of category files, COCO image folder)."""
    source, images = tmp_path / "sugarcrepe", tmp_path / "val2017"
    source.mkdir()
    images.mkdir()
    for category, items in SUGARCREPE.items():
        (source / f"{category}.json").write_text(json.dumps(items))
        for i, item in enumerate(items.values()):
            buffer = io.BytesIO()
            Image.new("RGB", (8, 8), (i * 50, 10, 10)).save(buffer, "JPEG")
            (images / item["filename"]).write_bytes(buffer.getvalue())
    return source, images


# ----------------------------------------------------------------------------- the release's layouts
# As github.com/iclrautocomp/AutoComp-Code reads and writes them (evaluation/hf_benchmarks.py,
# evaluation/evaluate_all_models.py, generation/generate_captions.py, generate_images.py).


def webp(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (seed * 53 % 256, 40, seed * 29 % 256)).save(buffer, "WEBP")
    return buffer.getvalue()


# evaluate_all_models.py's BENCHMARK_CONFIGS: (hub repo, task_type, N, sources)
HUB_REPOS = [
    (f"AutoComp/AutoComp-{kind}-N{n}-{t[0].upper()}", t, n, sources)
    for kind, sources in (("Minimal", ["minimal"]), ("Contextual", ["contextual"]),
                          ("Paired", ["minimal", "contextual"]))
    for t in ("color", "position")
    for n in (2, 3)
]  # fmt: skip

# (objects, labels, handmade caption, llm caption) per (task_type, N), as the scripts write them
HUB_ROWS = {
    ("color", 2): [
        (["Cookies", "Frame"], ["brown", "gold"],
         "a brown cookies, and a gold frame on a white background.",
         "Some brown cookies are piled next to a gold frame."),
        (["Chair", "Cup"], ["red", "blue"],
         "a red chair, and a blue cup on a white background.",
         "A red chair stands beside a blue cup in a sunny kitchen."),
    ],
    ("color", 3): [
        (["Bottle", "Hat", "Book"], ["red", "blue", "green"],
         "a red bottle, a blue hat, and a green book on a white background.",
         "A red bottle, a blue hat and a green book lie on a table."),
    ],
    ("position", 2): [
        (["Clock", "Couch"], ["below"],
         "A clock is below a couch on a white background.",
         "An old clock sits below a leather couch in the attic."),
    ],
    ("position", 3): [
        (["Chair", "Desk", "Lamp"], ["above", "to the left of"],
         "A chair is above a desk, which is to the left of a lamp on a white background.",
         "A chair hangs above a desk, which stands to the left of a lamp in the office."),
    ],
}  # fmt: skip


def hub_repo(root: Path, repo: str, task_type: str, n: int, sources: list[str]) -> Path:
    """A snapshot download of one hub repo: <root>/<name>/data/train-00000-of-00001.parquet, its
    images as datasets Image structs; Paired repos with handmade_* / llm_*, the others with
    caption / image."""
    labels = "colors" if task_type == "color" else "relations"
    columns: dict[str, list] = {"num_objects": [], "objects": [], labels: []}
    for i, (objects, attrs, handmade, llm) in enumerate(HUB_ROWS[(task_type, n)]):
        columns["num_objects"].append(n)
        columns["objects"].append(objects)
        columns[labels].append(attrs)
        texts = {"minimal": handmade, "contextual": llm}
        for source in sources:
            kind = "handmade" if source == "minimal" else "llm"
            prefix = kind if len(sources) == 2 else ""
            caption, image = (f"{prefix}_caption", f"{prefix}_image") if prefix else SINGLE
            image_name = f"concept_{i + 1:05d}_{kind}.webp"
            columns.setdefault(caption, []).append(texts[source])
            columns.setdefault(image, []).append({"bytes": webp(2 * i + (kind == "llm")),
                                                  "path": image_name})  # fmt: skip
    types = {"num_objects": pa.int64(), "objects": pa.list_(pa.string()),
             labels: pa.list_(pa.string())}  # fmt: skip
    schema = pa.schema(
        [(c, types.get(c, IMAGE if c.endswith("image") else pa.string())) for c in columns]
    )
    folder = root / repo.split("/")[1] / "data"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pydict(columns, schema), folder / "train-00000-of-00001.parquet")
    return folder.parent


SINGLE = ("caption", "image")

# generate_captions.py's JSON (then kept by the filtering/ scripts): one task type per file
JSON_ITEMS = [
    {"id": 1, "task_type": "color", "num_objects": 2, "objects": ["Cookies", "Frame"],
     "attributes": ["brown", "gold"],
     "handmade_caption": "a brown cookies, and a gold frame on a white background.",
     "llm_caption": "Some brown cookies are piled next to a gold frame."},
    {"id": 2, "task_type": "color", "num_objects": 2, "objects": ["Sneakers", "Cup"],
     "attributes": ["red", "blue"],
     "handmade_caption": "a pair of red sneakers, and a blue cup on a white background.",
     "llm_caption": "A pair of red sneakers sits next to a blue cup on the floor."},
    {"id": 4, "task_type": "color", "num_objects": 2, "objects": ["Bowl", "Pen"],
     "attributes": ["grey", "orange"],
     "handmade_caption": "a grey bowl, and an orange pen on a white background.",
     "llm_caption": "A grey bowl holds an orange pen on a desk."},
]  # fmt: skip


def json_release(root: Path, items: list[dict] = JSON_ITEMS) -> tuple[Path, Path]:
    """(the captions JSON, generate_images.py's --output_dir with handmade/ and llm/)."""
    source = root / "fully_validated_data.json"
    source.write_text(json.dumps(items, indent=2))
    images = root / "generated"
    for item in items:
        for k, kind in enumerate(("handmade", "llm")):
            path = images / kind / f"concept_{item['id']:05d}_{kind}.webp"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(webp(2 * item["id"] + k))
    return source, images
