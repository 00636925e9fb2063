"""The repository carries its whole contract: nothing in it cites a design or style document
that is not in it (users read the README and docs/, never a file outside the repository)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = ("DESIGN" + ".md", "STYLE" + ".md", "see " + "DESIGN")
SKIP_DIRS = {
    ".git",
    ".venv",
    ".ci-venv",
    "build",
    "dist",
    "results",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
}
TEXT = {".py", ".md", ".toml", ".txt", ".yaml", ".yml", ".sh", ".cfg", ".ini", ".json", ""}


def test_nothing_cites_a_document_outside_the_repository() -> None:
    found = []
    for p in REPO.rglob("*"):
        rel = p.relative_to(REPO)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if not p.is_file() or p.suffix not in TEXT or p.stat().st_size > 2_000_000:
            continue
        text = p.read_text(errors="replace")
        found += [f"{rel}: {o}" for o in OUTSIDE if o in text]
    assert found == []
