"""The generated results page (docs/RESULTS.md): each evaluation part and `canis bench`
rewrites only its own marked section, so the others and the hand-written text between them
stay. Torch-free, so the runtime's benchmarks use it as the training's evaluations do."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

RESULTS_DOC = Path("docs/RESULTS.md")  # the tracked page, relative to the checkout


def replace_section(doc: Path, name: str, markdown: str, title: str = "# Results") -> None:
    """Writes `markdown` as the section of `doc` between <!-- name:begin --> and
    <!-- name:end --> (appended when the markers are not there yet; a new document starts
    with `title`). The file is replaced whole, through a temporary file beside it, so an
    interrupted write leaves the old page, never half of one."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    section = f"{begin}\n{markdown}{end}\n"
    text = doc.read_text() if doc.exists() else f"{title}\n\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        text = head + section + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=doc.parent, prefix=f".{doc.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(temporary, doc)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
