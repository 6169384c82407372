"""`autocomp audit serve`: the annotators' web app (Starlette, server-rendered HTML).

One annotator per link (/a/<token>/); the token is the only credential, compared in constant
time, and an unknown token gets the same 404 as any unknown page. An annotator reaches only their
own items and images, by position: no URL carries a file name, so nothing else on disk is
reachable. Every click is a form POST that is appended to the annotator's journal and fsync'd
before the next page is sent; closing the browser and opening the link again resumes at the
first unanswered item. Keyboard: digits choose an option (with more than 9 options, type the
number and press Enter), y / n answer yes-no questions, the left arrow goes back. Works without
scripts too (plain buttons). Every value from the study reaches the page through html.escape.
Blinding: the validity questions (which show the positive caption) open only after every choice
item is answered, and from then on the choice answers are locked. The organiser's page
/progress/<token>/ (its token derived from the annotators', printed by `audit serve`) shows each
annotator's counts only.
"""

from __future__ import annotations

import hmac
import html
import re
import time
from pathlib import Path
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from autocomp.audit.study import Study
from autocomp.errors import UsageError

MAX_BODY = 4096
ANSWER = re.compile(r"[0-9]{1,4}")  # an option index, as a form sends it
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; img-src 'self'; script-src 'self'; "
    "style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
TASK_TITLES = {"confusion": "Choose the caption", "swap": "Choose the caption", "valid": "Check"}

CSS = """body{font-family:system-ui,sans-serif;margin:1rem auto;max-width:1100px;color:#222}
header{display:flex;justify-content:space-between;align-items:center}
progress{width:40%}main{display:flex;gap:1.5rem;align-items:flex-start}
img{width:min(520px,45vw);height:auto;border:1px solid #ccc}
form{flex:1}button.option{display:block;width:100%;text-align:left;margin:2px 0;padding:4px 8px;
font-size:14px;background:#f6f6f6;border:1px solid #ccc;border-radius:3px;cursor:pointer}
button.option:hover{background:#e8f0fb}button.chosen{background:#cfe3ff;border-color:#1b6ca8}
kbd{display:inline-block;min-width:1.6em;font-weight:bold;color:#1b6ca8}
.hint{color:#666;font-size:12px}#typed{font-weight:bold}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:2px 8px}
.many{columns:2;column-gap:8px}.many button.option{font-size:12px;padding:2px 6px;
break-inside:avoid}"""

JS = """document.addEventListener('keydown', function (e) {
  if (e.ctrlKey || e.metaKey || e.altKey) { return; }
  var form = document.getElementById('answer');
  var typed = document.getElementById('typed');
  var k = e.key;
  if (k === 'ArrowLeft') {
    var prev = document.getElementById('prev');
    if (prev) { e.preventDefault(); prev.click(); }
    return;
  }
  if (!form) { return; }
  var buttons = form.querySelectorAll('button.option');
  function send(i) { if (i >= 1 && i <= buttons.length) { buttons[i - 1].click(); } }
  if (form.dataset.kind === 'yesno') {
    if (k === 'y' || k === 'Y') { e.preventDefault(); send(1); }
    if (k === 'n' || k === 'N') { e.preventDefault(); send(2); }
  } else if (/^[0-9]$/.test(k)) {
    e.preventDefault();
    if (buttons.length <= 9) { send(parseInt(k, 10)); }
    else { typed.textContent = (typed.textContent + k).slice(-2); }
  } else if (k === 'Enter' && buttons.length > 9 && typed.textContent) {
    e.preventDefault();
    send(parseInt(typed.textContent, 10));
    typed.textContent = '';
  } else if (k === 'Backspace' && typed && typed.textContent) {
    e.preventDefault();
    typed.textContent = typed.textContent.slice(0, -1);
  }
});
"""

esc = html.escape


def _page(title: str, body: str) -> HTMLResponse:
    text = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<link rel="stylesheet" href="/app.css"><script src="/app.js" defer></script></head>
<body>{body}</body></html>"""
    return HTMLResponse(text, headers=HEADERS)


def _not_found() -> Response:
    return Response("Not found", status_code=404, media_type="text/plain", headers=HEADERS)


def create_app(study_dir: str | Path) -> Starlette:
    """The app serving one study folder."""
    pages = _Pages(Study(study_dir))
    routes = [
        Route("/", pages.home),
        Route("/favicon.ico", pages.no_icon),
        Route("/app.js", pages.asset),
        Route("/app.css", pages.asset),
        Route("/a/{token}", pages.start),
        Route("/a/{token}/", pages.start),
        Route("/a/{token}/item/{item:int}", pages.show, methods=["GET"]),
        Route("/a/{token}/item/{item:int}", pages.record, methods=["POST"]),
        Route("/a/{token}/image/{item:int}", pages.image),
        Route("/a/{token}/done", pages.done),
        Route("/progress/{token}", pages.progress),
        Route("/progress/{token}/", pages.progress),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return _not_found()

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return Response("Method not allowed", status_code=405, headers=HEADERS)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    app.state.study = pages.study
    return app


def _base(token: str) -> str:
    return f"/a/{token}"


class _Pages:
    """The app's request handlers over one study (each route's handler is a method)."""

    def __init__(self, study: Study) -> None:
        self.study = study

    def who(self, request: Request) -> str | None:
        return self.study.annotator_of(str(request.path_params.get("token", "")))

    def item_of(self, request: Request) -> tuple[str, int] | None:
        """The annotator and the item position of an item URL (None: not one of theirs)."""
        annotator = self.who(request)
        item = request.path_params["item"]
        if annotator is None or not 0 <= item < len(self.study.items[annotator]):
            return None
        return annotator, item

    def next_open(self, annotator: str, after: int) -> int | None:
        done = self.study.answers(annotator)
        total = len(self.study.items[annotator])
        for i in [*range(after + 1, total), *range(0, after + 1)]:
            if i not in done:
                return i
        return None

    def gate(self, annotator: str, item: int) -> tuple[int | None, bool]:
        """Blinding: the validity questions show the positive caption, so they open only when
        every choice item is answered (else: the first open choice item), and choice answers
        are locked once a validity question is answered."""
        items, answers = self.study.items[annotator], self.study.answers(annotator)
        if items[item]["task"] == "valid":
            for i, entry in enumerate(items):
                if entry["task"] != "valid" and i not in answers:
                    return i, False
            return None, False
        return None, any(items[i]["task"] == "valid" for i in answers)

    async def home(self, request: Request) -> Response:
        return _page("Study", "<p>Open the link you were given for this study.</p>")

    async def start(self, request: Request) -> Response:
        annotator = self.who(request)
        if annotator is None:
            return _not_found()
        token = request.path_params["token"]
        item = self.next_open(annotator, -1)
        target = f"{_base(token)}/done" if item is None else f"{_base(token)}/item/{item}"
        return RedirectResponse(target, status_code=303, headers=HEADERS)

    async def show(self, request: Request) -> Response:
        found = self.item_of(request)
        if found is None:
            return _not_found()
        annotator, item = found
        token = request.path_params["token"]
        first_open, locked = self.gate(annotator, item)
        if first_open is not None:
            return RedirectResponse(f"{_base(token)}/item/{first_open}", 303, headers=HEADERS)
        items, answers = self.study.items[annotator], self.study.answers(annotator)
        return _item_page(items[item], item, len(items), answers, token, locked)

    async def record(self, request: Request) -> Response:
        found = self.item_of(request)
        if found is None:
            return _not_found()
        annotator, item = found
        body = b""
        async for chunk in request.stream():  # never buffer more than MAX_BODY
            body += chunk
            if len(body) > MAX_BODY:
                return Response("Too large", status_code=413, headers=HEADERS)
        values = parse_qs(body.decode("utf-8", "replace")).get("answer", [])
        options = self.study.items[annotator][item]["options"]
        # ASCII digits only: str.isdigit() also takes '²' and '١', which int() refuses or reads
        if len(values) != 1 or not ANSWER.fullmatch(values[0]) or int(values[0]) >= len(options):
            return Response("Bad answer", status_code=400, headers=HEADERS)
        token = request.path_params["token"]
        first_open, locked = self.gate(annotator, item)
        if first_open is not None or locked:
            return Response("This item is not open", status_code=409, headers=HEADERS)
        self.study.answer(annotator, item, int(values[0]))
        following = self.next_open(annotator, item)
        target = f"{_base(token)}/done" if following is None else f"{_base(token)}/item/{following}"
        return RedirectResponse(target, status_code=303, headers=HEADERS)

    async def image(self, request: Request) -> Response:
        found = self.item_of(request)
        if found is None:
            return _not_found()
        try:
            path = self.study.image(*found)
        except PermissionError:
            return _not_found()
        if not path.is_file():
            return _not_found()
        return FileResponse(path, media_type="image/png", headers=HEADERS)

    async def done(self, request: Request) -> Response:
        annotator = self.who(request)
        if annotator is None:
            return _not_found()
        token = request.path_params["token"]
        total = len(self.study.items[annotator])
        answered = len(self.study.answers(annotator))
        missing = self.next_open(annotator, -1)
        more = (
            f'<p><a href="{_base(token)}/item/{missing}">Continue with the open items</a></p>'
            if missing is not None
            else "<p>All items are answered. Thank you! You can close this page.</p>"
        )
        body = (
            f"<h1>Study progress</h1><p id=done>Answered {answered} of {total}.</p>{more}"
            f'<p><a id="prev" href="{_base(token)}/item/{total - 1}">&larr; review answers</a></p>'
        )
        return _page("Study progress", body)

    async def progress(self, request: Request) -> Response:
        """The organiser's page: each annotator's progress, counts only (no item, answer or
        sample is shown)."""
        token = str(request.path_params.get("token", ""))
        if not hmac.compare_digest(self.study.progress_token().encode(), token.encode()):
            return _not_found()
        rows = [self.progress_row(name, p) for name, p in self.study.progress().items()]
        body = (
            "<h1>Study progress</h1><p class=hint>Refresh the page to update. Collect the "
            "answers with <code>autocomp audit collect</code> once every annotator is done.</p>"
            "<table id=progress><thead><tr><th>Annotator</th><th>Answered</th>"
            "<th>Choice items</th><th>Validity questions</th><th>State</th><th>Last answer</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        return _page("Study progress", body)

    def progress_row(self, name: str, p: dict) -> str:
        """One annotator's row of the progress page (counts and the time of the last answer)."""
        journal = self.study.journal(name)
        last = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(journal.stat().st_mtime))
            if journal.is_file()
            else "–"
        )
        state = "done" if p["complete"] else f"{p['open']} open"
        return (
            f"<tr><td>{esc(name)}</td><td>{p['answered']} of {p['items']}</td>"
            f"<td>{p['choice_answered']} of {p['choice_items']}</td>"
            f"<td>{p['valid_answered']} of {p['valid_items']}</td><td>{esc(state)}</td>"
            f"<td>{esc(last)}</td></tr>"
        )

    async def asset(self, request: Request) -> Response:
        name = request.url.path
        text, kind = (JS, "text/javascript") if name == "/app.js" else (CSS, "text/css")
        return Response(text, media_type=kind, headers=HEADERS)

    async def no_icon(self, request: Request) -> Response:
        return Response(status_code=204, headers=HEADERS)


def _item_page(
    entry: dict, item: int, total: int, answers: dict, token: str, locked: bool
) -> HTMLResponse:
    """One item's page: the image, the prompt, one button per option (the chosen one marked),
    the keyboard hint and the link back."""
    chosen = answers.get(item)
    yesno = entry["task"] == "valid"
    buttons = []
    for i, option in enumerate(entry["options"]):
        label = option[0].upper() if yesno else str(i + 1)
        cls = "option chosen" if i == chosen else "option"
        buttons.append(
            f'<button class="{cls}" type="submit" name="answer" value="{i}" '
            f"{'disabled ' if locked else ''}"
            f'aria-pressed="{"true" if i == chosen else "false"}">'
            f"<kbd>{esc(label)}</kbd> {esc(option)}</button>"
        )
    hint = _hint(locked, yesno, len(entry["options"]))
    base = _base(token)
    prev = f'<a id="prev" href="{base}/item/{item - 1}">&larr; previous</a>' if item > 0 else ""
    body = f"""<header><h1>{esc(TASK_TITLES[entry["task"]])}</h1>
<span>Item {item + 1} of {total} &middot; answered {len(answers)}
<progress max="{total}" value="{len(answers)}"></progress></span></header>
<main><img src="{base}/image/{item}" alt="the image to judge">
<form id="answer" method="post" action="{base}/item/{item}"
 data-kind="{"yesno" if yesno else "choice"}">
<p><strong>{esc(entry["prompt"])}</strong></p>
<div class="{"options many" if len(buttons) > 12 else "options"}">{"".join(buttons)}</div>
<p class="hint">{hint} Left arrow: previous item.</p></form></main>
<nav>{prev}</nav>"""
    return _page(f"Item {item + 1} of {total}", body)


def _hint(locked: bool, yesno: bool, options: int) -> str:
    """The keyboard hint under an item's options."""
    if locked:
        return "Locked: the answers to choice items cannot change after the checks began."
    if yesno:
        return "Press y or n."
    if options <= 9:
        return "Press the option's number."
    return "Type the option's number, then Enter (typed: <span id=typed></span>)."


def check_port(port: int) -> None:
    if not 0 < port < 65536:
        raise UsageError("port", port, "must be 1 to 65535")


def check_free(host: str, port: int) -> None:
    """Refuse a port another program listens on, before any link is printed (uvicorn would
    print its own error and exit 3 after the links)."""
    import socket

    check_port(port)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UsageError("host", host, f"does not resolve ({exc.strerror or exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            why = exc.strerror or exc
            fix = f"cannot listen there ({why}); stop what uses it or pick another port"
            raise UsageError("port", port, fix) from None


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (127.0.0.1, ::1, localhost): any
    other address serves the links in plain HTTP to its whole network."""
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def links(study_dir: str | Path, host: str, port: int) -> dict[str, str]:
    """Each annotator's link (the port checked first, then the study)."""
    check_port(port)
    study = Study(study_dir)
    check_free(host, port)
    return {
        name: f"http://{host}:{port}/a/{record['token']}/"
        for name, record in study.annotators.items()
    }


def progress_link(study_dir: str | Path, host: str, port: int) -> str:
    """The organiser's progress page."""
    return f"http://{host}:{port}/progress/{Study(study_dir).progress_token()}/"


def serve(study_dir: str | Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    import uvicorn

    check_port(port)
    app = create_app(study_dir)
    check_free(host, port)
    uvicorn.run(app, host=host, port=port, log_level="warning")
