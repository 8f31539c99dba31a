"""A scratch project of stack files for the tests of what reads an environment's team stacks
(tools/team_stacks.py, tools/deploy.py): dev and prod, two team stacks of dev and one of prod."""

from __future__ import annotations

from pathlib import Path

from config.stack_files import PROJECT_DIR


def team_stack(environment_stack: str, team: str, environment: str = "dev") -> str:
    return (
        f"config:\n  gpu-platform:environment: {environment}\n  gpu-platform:environmentStack: acme/gpu-platform/{environment_stack}\n"
        f"  gpu-platform:tenant: {{name: {team}}}\n"
    )


def write_stacks(project: Path) -> Path:
    """`project` (created) holding the program's Pulumi.yaml, dev, prod, team-a-dev, team-b-dev and
    team-c-prod."""
    project.mkdir()
    (project / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (project / "Pulumi.dev.yaml").write_text("config:\n  gpu-platform:environment: dev\n")
    (project / "Pulumi.prod.yaml").write_text("config:\n  gpu-platform:environment: prod\n")
    (project / "Pulumi.team-b-dev.yaml").write_text(team_stack("dev", "b"))
    (project / "Pulumi.team-a-dev.yaml").write_text(team_stack("dev", "a"))
    (project / "Pulumi.team-c-prod.yaml").write_text(team_stack("prod", "c", "prod"))
    return project
