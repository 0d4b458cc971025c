"""mkdocs hook: the changelog page is the repository's CHANGELOG.md, never a copy."""

from __future__ import annotations

from pathlib import Path

PAGE = "changelog.md"
SOURCE = Path(__file__).resolve().parents[2] / "CHANGELOG.md"


def on_files(files, config):  # type: ignore[no-untyped-def]
    """mkdocs event: add CHANGELOG.md to the site's files."""
    from mkdocs.structure.files import File  # only the docs build needs mkdocs

    files.append(File.generated(config, PAGE, abs_src_path=str(SOURCE)))
    return files
