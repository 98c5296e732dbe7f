"""`make docs` as a user types it: the site builds in strict mode (a broken link or anchor fails it) and has a page
for every guide the README points to."""

from __future__ import annotations

from tests.readme import ROOT, run_typed, user_environment


def test_make_docs_builds_the_site_with_every_page() -> None:
    result = run_typed("make docs", user_environment(), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    site = ROOT / "build" / "site"
    pages = [page.relative_to(ROOT / "docs").with_suffix(".html") for page in (ROOT / "docs").rglob("*.md")]
    missing = [str(page) for page in pages if not (site / page).exists()]
    assert not missing, missing
    assert "Where is" in (site / "architecture.html").read_text()
