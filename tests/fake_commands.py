"""Stand-ins for command-line tools a workflow step or tool calls (`gh`, `pulumi`): a script of
ours, first on PATH, that records its arguments in a log the test reads."""

from __future__ import annotations

from pathlib import Path


def install_fake(tmp_path: Path, name: str, script: str) -> tuple[Path, Path]:
    """Writes `script` as the executable `name` in tmp_path/bin; returns (the bin directory to put
    first on PATH, the empty log file)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(script)
    (bin_dir / name).chmod(0o755)
    log = tmp_path / f"{name}.log"
    log.write_text("")
    return bin_dir, log


def fake_on_path(tmp_path: Path, monkeypatch, name: str, script: str, log_variable: str) -> Path:
    """`install_fake`, first on this test's PATH, its log's path in the environment variable
    `log_variable` (for the script to write to); returns the log."""
    import os

    bin_dir, log = install_fake(tmp_path, name, script)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv(log_variable, str(log))
    return log
