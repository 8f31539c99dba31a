"""Every make variable reaches the program as data (issue 27 item 4): a value that is shell code, or
make code, is the argument the program receives, and nothing runs. The Makefile runs for real here,
with the program replaced by a recorder of its arguments (tests/make_support.py)."""

from __future__ import annotations

import pytest
from make_support import run_make

SHELL_CODE = "dev;touch x"
QUOTE_BREAK = 'x"; touch y; echo "'
MAKE_CODE = "$(shell touch z)"


def test_make_plan_passes_a_stack_that_is_shell_code_as_its_name(tmp_path):
    run = run_make(tmp_path, "plan", f"STACK={SHELL_CODE}")
    assert run.returncode == 0, run.output
    assert run.arguments == ["-m", "tools.plan", "--stack", SHELL_CODE]
    assert run.created == set()


def test_make_team_passes_a_name_that_breaks_out_of_quotes_as_the_name(tmp_path):
    run = run_make(tmp_path, "team", f"NAME={QUOTE_BREAK}", "ENV=dev")
    assert run.returncode == 0, run.output
    assert run.arguments == ["-m", "tools.new_team", "--name", QUOTE_BREAK, "--env", "dev"]
    assert run.created == set()


@pytest.mark.parametrize(
    "target, variables, expected",
    [
        (
            "plan",
            (f"STACK={MAKE_CODE}", f"COMPARE={SHELL_CODE}", f"POLICY_CONFIG={QUOTE_BREAK}"),
            ["--stack", MAKE_CODE, "--compare-to", SHELL_CODE, "--policy-pack-config", QUOTE_BREAK],
        ),
        (
            "team",
            (f"NAME={MAKE_CODE}", f"ENV={SHELL_CODE}", f"GPU={QUOTE_BREAK}", "MAX_GPUS=$$(touch w)", f"TEAM_PROJECT={MAKE_CODE}", "CIDR=`touch v`"),
            ["--name", MAKE_CODE, "--env", SHELL_CODE, "--gpu", QUOTE_BREAK, "--max-gpus", "$$(touch w)", "--project", MAKE_CODE, "--cidr", "`touch v`"],
        ),
    ],
)
def test_every_variable_is_one_argument_as_given(tmp_path, target, variables, expected):
    """Shell code, a broken quote and make's own `$(shell …)` alike: each value is the argument,
    as typed (make expands nothing in it either), and nothing else runs."""
    run = run_make(tmp_path, target, *variables)
    assert run.returncode == 0, run.output
    assert run.arguments[2:] == expected
    assert run.created == set()


@pytest.mark.parametrize("value", [MAKE_CODE, SHELL_CODE, QUOTE_BREAK, "tenant-nlp,tenant-speech gke"])
def test_make_plan_hands_allow_destroy_to_the_plan_as_typed(tmp_path, value):
    """ALLOW_DESTROY reaches tools/plan.py in its environment variable, as typed: make's own
    `$(shell …)` is not expanded, shell code not run."""
    run = run_make(tmp_path, "plan", "STACK=dev", f"ALLOW_DESTROY={value}")
    assert run.returncode == 0, run.output
    assert run.environment == {"ALLOW_DESTROY": value}
    assert run.arguments == ["-m", "tools.plan", "--stack", "dev"]
    assert run.created == set()


def test_allow_destroy_from_the_environment_is_data_too_and_unset_declares_nothing(tmp_path):
    (tmp_path / "given").mkdir()
    (tmp_path / "unset").mkdir()
    assert run_make(tmp_path / "given", "plan", environment={"ALLOW_DESTROY": MAKE_CODE}).environment == {"ALLOW_DESTROY": MAKE_CODE}
    assert run_make(tmp_path / "unset", "plan").environment == {"ALLOW_DESTROY": ""}


def test_make_acceptance_passes_its_variables_as_data(tmp_path):
    run = run_make(
        tmp_path,
        "acceptance",
        f"PROJECT={SHELL_CODE}",
        f"REGION={MAKE_CODE}",
        "ACCEPTANCE_FLAGS=--require *",
        "RESTORE_DRILL=1",
    )
    assert run.returncode == 0, run.output
    arguments = run.arguments
    assert arguments[arguments.index("--project") + 1] == SHELL_CODE
    assert arguments[arguments.index("--region") + 1] == MAKE_CODE
    # ZONES' default is made of REGION: this Makefile's own defaults are expanded as usual.
    assert arguments[arguments.index("--zones") + 1] == f"{MAKE_CODE}-a,{MAKE_CODE}-b"
    assert "--restore-drill" in arguments and "--watchdog-drill" not in arguments
    assert arguments[-2:] == ["--require", "*"]  # split into words, never globbed or run
    assert run.created == set()


def test_a_variable_from_the_environment_is_data_too(tmp_path):
    run = run_make(tmp_path, "plan", environment={"STACK": MAKE_CODE, "COMPARE": SHELL_CODE})
    assert run.arguments == ["-m", "tools.plan", "--stack", MAKE_CODE, "--compare-to", SHELL_CODE]
    assert run.created == set()


def test_the_defaults_still_apply(tmp_path):
    def run(name: str, target: str, *variables: str) -> list[str] | None:
        directory = tmp_path / name
        directory.mkdir()
        return run_make(directory, target, *variables).arguments

    assert run("plan", "plan") == ["-m", "tools.plan", "--stack", "dev"]
    assert run("quick", "bench", "QUICK=1") == ["-m", "bench.run", "--quick"]
    assert run("bench", "bench") == ["-m", "bench.run"]
