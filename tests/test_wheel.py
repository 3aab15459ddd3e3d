"""Installable as users install (issue 14, item 6): a wheel built from this checkout
installs with its ``server`` and ``mcp`` extras into a fresh virtual environment (from the
package index, as a user's pip would) and its ``jiyi`` command serves the REST API.

Nothing from this checkout leaks in: the server runs from the new environment, in an
empty directory, without PYTHONPATH. About 45 s on the project machine (most of it pip).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from jiyi import __version__
from tests.test_web import _free_port

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.slow
def test_the_built_wheel_installs_with_extras_and_serves(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    dist, venv, work = tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        "-w",
        dist,
        ROOT,
        cwd=work,
        env=env,
        timeout=300,
    )
    (wheel,) = dist.glob("jiyi-*.whl")
    assert wheel.name == f"jiyi-{__version__}-py3-none-any.whl"
    _run(sys.executable, "-m", "venv", venv, cwd=work, env=env, timeout=120)
    pip = (venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check")
    _run(*pip, f"{wheel}[server,mcp]", cwd=work, env=env, timeout=600)
    jiyi = venv / "bin" / "jiyi"
    assert _run(jiyi, "--version", cwd=work, env=env, timeout=60).strip() == f"jiyi {__version__}"
    where = _run(
        venv / "bin" / "python", "-c", "import jiyi; print(jiyi.__file__)", cwd=work, env=env, timeout=60
    )
    assert Path(where.strip()).is_relative_to(venv), where  # the installed copy, not the checkout

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with (work / "serve.log").open("wb") as log:
        server = subprocess.Popen(
            [jiyi, "--db", work / "memory.db", "serve", "--port", str(port)],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(base, server, work / "serve.log")
        with httpx.Client(base_url=base, timeout=30) as client:
            r = client.post("/v1/memories", json={"content": "我最喜欢的编程语言是 Python", "user_id": "u"})
            assert r.status_code == 201, r.text
            hits = client.post("/v1/memories/search", json={"query": "favourite language?", "user_id": "u"})
            assert hits.json()["hits"][0]["item"]["id"] == r.json()["item"]["id"]
            assert client.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
    out = (work / "serve.log").read_text(errors="replace")
    # uvicorn shuts down cleanly, then re-raises the signal it caught, as a process should
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in out, out


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, (
            f"jiyi serve exited with {proc.returncode}:\n{log.read_text(errors='replace')}"
        )
        assert time.monotonic() < deadline, "jiyi serve was not ready within 60 s"
        time.sleep(0.2)
