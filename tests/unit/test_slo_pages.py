"""The console's SLO pages: a team's budget, burn by day, freshness and unverified destinations; the executive
heat-map of teams x days from a seeded ledger, each tier's burn and the week's top failing jobs; the widget shows
every team through the on-call alias and one team through its own."""

from __future__ import annotations

from datetime import date, timedelta

from jobsched.adapters.memory import MemoryJobs
from jobsched.console import slo_pages
from jobsched.console.widget import Platform, Viewer, render_widget
from jobsched.core.runs import parse_instant
from jobsched.core.slo import RunCount, SloTiers
from jobsched.core.spec import JobSpec

NOW = parse_instant("2027-01-14T12:00:00Z")
TODAY = NOW.date()


def links(path: str) -> str:
    return "/console" + path


def seeded() -> MemoryJobs:
    """Three teams over 14 days: payments always within, data over its critical budget on the 12th, web idle
    on most days and a best-effort job failing a lot (within best-effort's 5%? no: 10 of 100)."""
    jobs = MemoryJobs()
    for back in range(14):
        day = TODAY - timedelta(days=back)
        for _ in range(50):
            jobs.count_run("payments", "critical", day, RunCount(), job="payments/settle")
        jobs.note_team_day("payments", day)
        for _ in range(100):
            jobs.count_run("data", "important", day, RunCount(), job="data/sync")
        jobs.note_team_day("data", day)
    bad_day = date(2027, 1, 12)
    for _ in range(20):
        jobs.count_run("data", "critical", bad_day, RunCount(), job="data/ledger-close")
    jobs.count_run("data", "critical", bad_day, RunCount(bad=1), job="data/ledger-close")
    jobs.count_run("data", "critical", bad_day, RunCount(ended=0, judged=1, stale=1), job="data/daily-load")
    for _ in range(90):
        jobs.count_run("web", "best-effort", TODAY, RunCount(), job="web/rebuild")
    for _ in range(10):
        jobs.count_run("web", "best-effort", TODAY, RunCount(bad=1), job="web/rebuild")
    jobs.note_team_day("web", TODAY)
    return jobs


def test_the_heat_map_marks_each_team_and_day_within_near_or_over_its_slos() -> None:
    page = slo_pages.executive(seeded(), SloTiers(), now=NOW, links=links)
    assert page.title == "SLA compliance"
    body = page.body
    cut = [row.split("</tr>")[0] for row in body.split("<tr>")[2:5]]
    rows = {row.split("</a>", 1)[0].rsplit(">", 1)[-1]: row for row in cut}
    assert set(rows) == {"data", "payments", "web"}
    assert rows["payments"].count(slo_pages.MET) == 14
    # data on the 12th: 2 bad of 22 critical events, far over 0.1%.
    assert "data 2027-01-12: 120 of 122 good (98.36%)" in rows["data"] and rows["data"].count(slo_pages.MISSED) == 1
    # web: 10% bad where best-effort allows 5% (burn 2.0: near); idle before.
    assert "web 2027-01-14: 90 of 100 good (90.00%), worst tier burn 2.0" in rows["web"]
    assert rows["web"].count(slo_pages.IDLE) == 13
    assert "/console/teams/data/slo" in body
    top = body.split("top failing jobs")[1]
    assert top.index("web/rebuild") < top.index("data/daily-load") < top.index("data/ledger-close")  # most, then name
    assert ">10<" in top
    # A member of one team sees that team's row only.
    own = slo_pages.executive(seeded(), SloTiers(), now=NOW, links=links, teams={"web"}).body
    assert "payments" not in own and "web" in own


def test_a_teams_slo_page_shows_budgets_burn_freshness_and_destinations_never_verified() -> None:
    jobs = seeded()
    spec = JobSpec.model_validate(
        {
            "name": "ledger-close",
            "team": "data",
            "target": {"type": "lambda", "function": "f"},
            "escalation": {"webhook": "https://hooks.example.com/data"},
        }
    )
    jobs.create(spec, now=NOW, principal="t", next_visit_at=None, cursor=NOW)
    jobs.note_team_freshness(
        "data", "daily-load", {"state": "stale", "policy": "09:00 UTC", "since": "2027-01-12T09:00:00Z"}
    )
    jobs.note_team_freshness("data", "hourly", {"state": "fresh", "policy": "1h", "since": "2027-01-14T10:00:00Z"})
    page = slo_pages.team_slo(jobs, "data", SloTiers(), now=NOW, links=links)
    body = page.body
    assert page.title == "SLOs of team data"
    assert "ledger-close</a> (1)" in body and "daily-load</a> (1)" in body  # burning critical
    assert body.index("daily-load") < body.index("hourly")  # stale first on the freshness board
    assert "https://hooks.example.com/data" in body and "never verified" in body
    jobs.record_drills("data", {"https://hooks.example.com/data": {"outcome": "delivered", "at": "2027-01-14T11:00Z"}})
    assert "verified by its last drill" in slo_pages.team_slo(jobs, "data", SloTiers(), now=NOW, links=links).body


def test_the_widget_shows_every_team_on_call_and_one_team_through_its_alias() -> None:
    jobs = seeded()
    oncall = render_widget(
        {"view": "executive"},
        jobs,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        NOW,
        viewer=Viewer(None, every_team=True),
        platform=Platform(),
    )
    assert "payments" in oncall and "web" in oncall
    team = render_widget({"view": "executive"}, jobs, None, NOW, viewer=Viewer("web"))  # type: ignore[arg-type]
    assert "payments" not in team and "web" in team
    slo = render_widget({"view": "slo", "team": "data"}, jobs, None, NOW, viewer=Viewer("data"))  # type: ignore[arg-type]
    assert "SLOs of team data" in slo
    refused = render_widget({"view": "slo", "team": "data"}, jobs, None, NOW, viewer=Viewer("web"))  # type: ignore[arg-type]
    assert "Not allowed" in refused


def test_a_teams_recent_changes_newest_first_with_who_and_why_and_its_limits() -> None:
    from jobsched.console.changes_page import team_changes
    from jobsched.console.views import team_changes as team_changes_view

    jobs = MemoryJobs()
    at = NOW - timedelta(days=1)
    spec = JobSpec.model_validate({"name": "etl", "team": "data", "target": {"type": "lambda", "function": "f"}})
    jobs.create(spec, now=at - timedelta(days=30), principal="alice", next_visit_at=None, cursor=at)  # too old
    jobs.record_action("data/etl", version=1, now=at, principal="bob", action="pause", reason="emergency stop s1: INC")
    jobs.record_action("TEAM#data", version=1, now=at + timedelta(hours=1), principal="admin", action="team_limits",
                       details={"changes": {"max_running": 5}})  # fmt: skip
    changes = team_changes(jobs, "data", now=NOW)
    assert [(c.subject, c.entry.action) for c in changes] == [("team limits", "team_limits"), ("data/etl", "pause")]
    page = team_changes_view(jobs, "data", now=NOW, links=links)
    assert page.title == "Recent changes of team data"
    assert "emergency stop s1: INC" in page.body and "bob" in page.body and "max_running" in page.body
    assert "/console/teams/data/jobs/etl" in page.body and "alice" not in page.body
    widget = render_widget({"view": "changes", "team": "data"}, jobs, None, NOW, viewer=Viewer("data"))  # type: ignore[arg-type]
    assert "Recent changes of team data" in widget
    assert "Not allowed" in render_widget({"view": "changes", "team": "data"}, jobs, None, NOW, viewer=Viewer("web"))  # type: ignore[arg-type]
