"""The Serve floor benchmark: a real local Ray Serve app and a bare HTTP server, answered over loopback."""
from __future__ import annotations

import re

import pytest

from jobs.bench import serve_floor


def test_bare_http_pass_answers_every_request():
    r = serve_floor.bare_http(20)
    assert set(r) == {"p50", "p95", "p99"} and 0 < r["p50"] <= r["p95"] <= r["p99"]


def test_requests_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        serve_floor.main(["--requests", "0"])
    assert "--requests must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
def test_floor_report_has_both_rows(capsys):
    assert serve_floor.main(["--requests", "20"]) == 0
    out = capsys.readouterr().out
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\| ([^|]+?) \| ([\d.]+) \|", out, re.M)}
    assert set(rows) == {"bare HTTP server, this process", "no-op Serve app (proxy, router, replica)"}
    assert all(v > 0 for v in rows.values())
