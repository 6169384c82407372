"""A study folder as the app and `audit collect` see it: annotators, their items, and the
answer journals (append-only JSON lines, fsync'd per answer; the last answer to an item wins).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from autocomp.audit.config import ANSWERS_DIR, IMAGES_DIR, ITEMS_DIR, KEY_FILE, STUDY_FILE
from autocomp.errors import UsageError
from autocomp.store.catalog.ids import check_component


class Study:
    """The study folder `root`, checked on open; answers are written through `answer`."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        manifest = self.root / STUDY_FILE
        if not manifest.is_file() or not (self.root / KEY_FILE).is_file():
            raise UsageError(
                "study_dir", str(root), f"has no {STUDY_FILE} and {KEY_FILE}; give the folder "
                "written by `autocomp audit export`"
            )  # fmt: skip
        try:
            self.manifest = json.loads(manifest.read_text(encoding="utf-8"))
            if not isinstance(self.manifest, dict) or not isinstance(
                self.manifest.get("annotators"), dict
            ):
                raise ValueError(f"{STUDY_FILE} is not a mapping with an annotators mapping")
            self.annotators: dict[str, dict[str, Any]] = self.manifest["annotators"]
            for name, record in self.annotators.items():
                check_component(f"{manifest}: annotators", name)  # names a journal and CSV
                if not isinstance(record, dict) or not isinstance(record.get("token"), str):
                    raise ValueError(f"annotator {name} has no token")
            self.items = {
                name: json.loads(self.path(ITEMS_DIR, f"{name}.json").read_text("utf-8"))
                for name in self.annotators
            }
            if not all(isinstance(items, list) for items in self.items.values()):
                raise ValueError(f"an {ITEMS_DIR}/ file is not a list of items")
        except (OSError, ValueError, KeyError, TypeError, PermissionError) as exc:
            fix = f"is not a readable study folder ({exc})"
            raise UsageError("study_dir", str(root), fix) from exc
        self._lock = threading.Lock()

    def path(self, folder: str, name: str) -> Path:
        """A file of the study folder; the name must stay inside `folder` (hostile input)."""
        base = (self.root / folder).resolve()
        target = (base / name).resolve()
        if target.parent != base:
            raise PermissionError(f"{name!r} is outside {folder}/")
        return target

    def annotator_of(self, token: str) -> str | None:
        """The annotator whose token this is (constant-time comparison), else None."""
        found = None
        for name, record in self.annotators.items():
            if hmac.compare_digest(str(record["token"]).encode(), token.encode()):
                found = name
        return found

    def journal(self, annotator: str) -> Path:
        return self.path(ANSWERS_DIR, f"{annotator}.jsonl")

    def answers(self, annotator: str) -> dict[int, int]:
        """Item position -> chosen option index (the last answer wins). A line cut short by a
        crash during its write (only the last line can be) is ignored."""
        out: dict[int, int] = {}
        path = self.journal(annotator)
        if not path.is_file():
            return out
        total = len(self.items[annotator])
        for raw in path.read_bytes().splitlines():
            try:  # a line cut inside a UTF-8 character is a cut line too: ignored
                record = json.loads(raw.decode("utf-8"))
                item, choice = int(record["item"]), int(record["answer"])
            except (ValueError, KeyError, TypeError):
                continue
            if 0 <= item < total and 0 <= choice < len(self.items[annotator][item]["options"]):
                out[item] = choice
        return out

    def answer(self, annotator: str, item: int, choice: int) -> None:
        """Record one answer durably before returning: append, flush, fsync."""
        entry = self.items[annotator][item]
        record = {
            "item": item,
            "key": entry["key"],
            "answer": choice,
            "option": entry["options"][choice],
            "time": round(time.time(), 3),
        }
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.journal(annotator), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # a line cut short by a crash stays on its own
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def progress(self) -> dict[str, dict[str, Any]]:
        """Per annotator: items answered, open and in all, per block too (choice: Confusion and
        Swap; valid: the validity questions), and whether every item is answered."""
        out: dict[str, dict[str, Any]] = {}
        for name, items in self.items.items():
            answered = self.answers(name)
            blocks: dict[str, list[int]] = {"choice": [0, 0], "valid": [0, 0]}
            for position, item in enumerate(items):
                block = blocks["valid" if item.get("task") == "valid" else "choice"]
                block[0] += position in answered
                block[1] += 1
            out[name] = {
                "answered": len(answered), "open": len(items) - len(answered),
                "items": len(items), "complete": len(answered) == len(items),
                **{f"{b}_answered": v[0] for b, v in blocks.items()},
                **{f"{b}_items": v[1] for b, v in blocks.items()},
            }  # fmt: skip
        return out

    def progress_token(self) -> str:
        """The organiser's credential for the progress page: derived from every annotator's
        token (so it is as secret as they are, and no study file changes)."""
        tokens = "\0".join(sorted(str(r["token"]) for r in self.annotators.values()))
        return hashlib.sha256(f"autocomp-progress\0{tokens}".encode()).hexdigest()[:32]

    def image(self, annotator: str, item: int) -> Path:
        return self.path(IMAGES_DIR, self.items[annotator][item]["image"])
