"""The scheduler's heartbeat file, as `status` and the container's healthcheck read it.

The healthcheck runs every minute for the scheduler's whole life: this module and what it
imports (the config, the lock's path) load no stage, no database driver and no scheduler."""

from __future__ import annotations

import json
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline import lock
from pipeline.config import Config


def path(config: Config) -> Path:
    """state/heartbeat.json, beside the run lock: each scheduler process has its own."""
    return lock.lock_path(config).with_name("heartbeat.json")


def read(config: Config, now: datetime) -> dict[str, Any] | None:
    """The scheduler's last heartbeat, its age, and whether it is recent enough to be alive
    (written within three intervals and not marked stopped); None if no scheduler ever ran here."""
    file = path(config)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        age = (now - datetime.fromisoformat(data["wake"])).total_seconds()
    except FileNotFoundError:
        return None
    except OSError as exc:  # its words, not '[Errno 13] Permission denied: PATH' after the path
        return {"path": str(file), "alive": False, "problem": f"unreadable: {exc.strerror or exc}"}
    except (ValueError, KeyError, TypeError) as exc:
        return {"path": str(file), "alive": False, "problem": f"unreadable: {exc}"}
    limit = 3 * int(data.get("interval_seconds") or config.schedule.heartbeat_seconds)
    gone = (not data.get("stopped") and data.get("host") == socket.gethostname()
            and isinstance(data.get("pid"), int) and not lock.alive(data["pid"]))  # kill -9, a crash
    return {**data, "path": str(file), "age_seconds": round(age), "gone": gone,
            "alive": not data.get("stopped") and not gone and age <= limit, "max_age_seconds": limit}


def line(beat: dict[str, Any] | None, config: Config) -> str:
    if beat is None:
        return f"scheduler: no heartbeat at {path(config)} (not running here)"
    if "problem" in beat:
        return f"scheduler: heartbeat {beat['path']} {beat['problem']}"
    state = ("stopped" if beat.get("stopped") else "gone without stopping (killed?)" if beat.get("gone")
             else "alive" if beat["alive"] else f"silent for more than {beat['max_age_seconds']} s")
    nexts = {} if beat.get("gone") else beat.get("next", {})  # a dead process fires nothing
    fires = ", ".join(f"{job} {when}" for job, when in nexts.items())
    age = beat["age_seconds"]  # a wake ahead of the clock read "last wake -3597 s ago"
    when = f"{age} s ago" if age >= 0 else f"{-age} s ahead of this machine's clock (it went back?)"
    return (f"scheduler: {state}, last wake {when} (pid {beat['pid']} on "
            f"{beat['host']})" + (f"; next {fires}" if fires else ""))
