"""Soak: `bin/earmark up` left running with the demo's periodic sweeps, plus an export and a
retrain of the demo project queued every --every seconds; then Ctrl-C (SIGINT) and a check
that every process it started is gone.

Usage: nice -n 10 .venv/bin/python benchmarks/soak.py --minutes 60 [--port 8790]
       [--var-dir /tmp/earmark-soak] [--every 300]

The stack runs from this checkout with its embedded defaults (SQLite and the private Redis
under --var-dir, which is emptied first). Counted: process exits the supervisor recorded
(core.ProcessExit: a worker death is one), /healthz answers every --probe seconds, jobs by
kind and final state, the load average. Prints a JSON summary and writes it to --out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "soak-monitoring-token"


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
    except (OSError, ValueError) as exc:
        return 0, {"error": str(exc)}


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (the supervisor starts each program in its own session,
    so the session id does not find them; the parent links do)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--var-dir", default="/tmp/earmark-soak")
    parser.add_argument("--every", type=float, default=300.0, help="seconds between loads")
    parser.add_argument("--probe", type=float, default=15.0, help="seconds between /healthz")
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    var = Path(args.var_dir)
    shutil.rmtree(var, ignore_errors=True)
    var.mkdir(parents=True)
    env = {
        **os.environ,
        "EARMARK_VAR_DIR": str(var),
        "PORT": str(args.port),
        "DEBUG": "1",
        "HEALTHZ_TOKEN": TOKEN,
        "DJANGO_SETTINGS_MODULE": "earmark.settings",
        # the virtualenv running this script, not a new one beside the checkout
        "EARMARK_VENV": os.environ.get("EARMARK_VENV", sys.prefix),
    }
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):  # the embedded defaults
        env.pop(name, None)
    os.environ.update({k: env[k] for k in ("EARMARK_VAR_DIR", "DEBUG", "HEALTHZ_TOKEN")})
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")

    started = time.monotonic()
    out = (var / "up.out").open("wb")
    up = subprocess.Popen(
        [str(ROOT / "bin" / "earmark"), "up"],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    while healthz(args.port)[0] != 200:
        if up.poll() is not None or time.monotonic() - started > 900:
            sys.exit(f"the stack did not come up; see {var / 'up.out'}")
        time.sleep(2)
    ready_s = time.monotonic() - started

    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from active.models import Retrain
    from active.services import retrain_start
    from core.models import Job, ProcessExit, Project
    from corpus.services import snapshot_start

    project = Project.objects.get(slug="demo")
    deadline = time.monotonic() + args.minutes * 60
    next_load = time.monotonic()
    probes: Counter[int] = Counter()
    failing: Counter[str] = Counter()
    loads: list[float] = []
    exports = retrains = retrains_in_flight = 0
    pids: set[int] = set()
    try:
        while time.monotonic() < deadline:
            if time.monotonic() >= next_load:
                snapshot_start(project=project, fmt="jsonl", text="raw", splits=["train", "val"])
                exports += 1
                before = Retrain.objects.count()
                retrain_start(
                    project=project,
                    trigger=Retrain.Trigger.MANUAL,
                    reason="soak",
                    debounce=False,
                )
                if Retrain.objects.count() > before:
                    retrains += 1
                else:  # the last one still queued or running: retrain_start returns it
                    retrains_in_flight += 1
                next_load += args.every
            status, body = healthz(args.port)
            probes[status] += 1
            for name, check in body.get("checks", {}).items():
                if check.get("core") and not check.get("ok"):
                    failing[f"{name}: {check.get('detail', '')}"[:200]] += 1
            loads.append(os.getloadavg()[0])
            time.sleep(args.probe)
        ran_s = time.monotonic() - started - ready_s
        pids = descendants(up.pid)
        exits = [
            {"program": e.program, "pid": e.pid, "ending": e.ending, "at": e.exited_at.isoformat()}
            for e in ProcessExit.objects.order_by("exited_at")
        ]
        jobs = Counter(
            f"{kind} {state}" for kind, state in Job.objects.values_list("kind", "state")
        )
    finally:
        stop_at = time.monotonic()
        up.send_signal(signal.SIGINT)  # Ctrl-C
        with contextlib.suppress(subprocess.TimeoutExpired):
            up.wait(timeout=120)
        stop_s = time.monotonic() - stop_at
    left = sorted(pid for pid in pids if alive(pid))
    summary = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {os.cpu_count()} cores",
        "ready_s": round(ready_s, 1),
        "ran_minutes": round(ran_s / 60, 1),
        "every_s": args.every,
        "exports_queued": exports,
        "retrains_queued": retrains,
        "retrain_requests_that_found_one_in_flight": retrains_in_flight,
        "process_exits": exits,
        "healthz": {str(k): v for k, v in sorted(probes.items())},
        "healthz_core_failures": dict(failing),
        "jobs": dict(sorted(jobs.items())),
        "load_1min_mean": round(sum(loads) / max(1, len(loads)), 2),
        "load_1min_max": round(max(loads, default=0.0), 2),
        "ctrl_c": {
            "exit_code": up.returncode,
            "seconds": round(stop_s, 1),
            "processes_before": len(pids),
            "left_running": left,
        },
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
