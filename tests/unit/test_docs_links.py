"""Every relative link in the README and the documentation leads somewhere: the file exists, and the heading
an anchor names is in it. (The site build, `make docs`, checks the pages again with MkDocs in strict mode;
tests/infra/test_docs_site.py runs it. Links to other sites are not followed: the tests run offline.)"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs both write it (ASCII words and hyphens, lower case)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text.strip().lower())
    return re.sub(r"[\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(match) for match in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for link in links(page):
        if re.match(r"^[a-z]+:", link):
            continue  # another site, mailto: not followed offline
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_the_readme_leads_to_every_page_of_the_guides() -> None:
    linked = {
        (ROOT / link.partition("#")[0]).resolve() for link in links(ROOT / "README.md") if link.startswith("docs/")
    }
    guides = {page.resolve() for page in (ROOT / "docs").glob("*/*.md") if page.parent.name != "console"}
    assert guides <= linked, sorted(str(page.relative_to(ROOT)) for page in guides - linked)
