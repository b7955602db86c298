"""Documents that several commands write (docs/EVALUATION.md, docs/BENCHMARKS.md): each command
rewrites only its own marked section, so the others and the hand-written text between them stay.
Torch-free, so the runtime's tools (`canis bench`) use it as the training's evaluations do."""

from __future__ import annotations

from pathlib import Path


def replace_section(doc: Path, name: str, markdown: str, title: str = "# Evaluation") -> None:
    """Writes `markdown` as the section of `doc` between <!-- name:begin --> and
    <!-- name:end --> (appended when the markers are not there yet; a new document starts
    with `title`), so each command that writes a document rewrites only its own section and
    the others stay."""
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
    doc.write_text(text)
