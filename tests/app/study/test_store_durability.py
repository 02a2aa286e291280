"""Every event the study server acknowledged survives a SIGKILL of the server."""

from __future__ import annotations

import json

from stateseer.testing import StudyServer, audit, simulate


def test_acknowledged_events_survive_sigkill(explored_run, tmp_path):
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"study": "kill-test", "run": str(explored_run),
                                 "tasks": [{"prompt": "Anything?"}]}))
    db = tmp_path / "log.sqlite"
    with StudyServer(study, db, log_path=tmp_path / "server.log") as server:
        ack, _ = simulate(server.port, 4, 100, kill_at=0.5, kill=server.kill)
        assert server.proc.returncode == -9  # killed, not stopped
    assert len(ack.acked) >= 200  # killed mid-stream, once half the events were acked
    assert ack.errors == 0
    report = audit(db, ack)
    assert report["lost"] == 0, report
    assert report["integrity"] == "ok" and report["journal_mode"] == "wal"
    assert report["n_events_in_db"] >= report["n_events_acked"]
