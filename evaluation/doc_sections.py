"""The generated results page (docs/RESULTS.md): each evaluation part and `canis bench`
rewrites only its own marked section, so the others and the hand-written text between them
stay. Torch-free, so the runtime's benchmarks use it as the training's evaluations do."""

from __future__ import annotations

import argparse
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


def add_doc_options(parser: argparse.ArgumentParser) -> None:
    """--write-docs and --doc: where this part's section of the results page goes (none by
    default: only the terminal and --json)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--write-docs",
        action="store_true",
        help=f"rewrite this part's section of the tracked results page, {RESULTS_DOC}",
    )
    where.add_argument(
        "--doc", type=Path, help="rewrite this part's section of this Markdown file instead"
    )


def results_doc(args) -> Path | None:
    """The page this run writes its section into: --doc, else the tracked page with
    --write-docs, else none."""
    if args.doc is not None:
        return None if str(args.doc) == "-" else args.doc
    return RESULTS_DOC if args.write_docs else None
