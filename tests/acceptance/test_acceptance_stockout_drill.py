"""The stockout drill (STOCKOUT_DRILL=1) and the Flex-start and reservation runs (FLEX_START=1,
RESERVATION=<name>): what the run declares, what it reads of a reservation, and the drill replayed
against the hand-written outputs of tests/acceptance/data (a stand-in tenant and platform whose
claims change as fake time passes): the steps it records, by whose clock, and the report."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from tests.acceptance import capacity_drill, capacity_runs
from tests.acceptance.drills import StockoutDrill, check_capacity_vm, check_flex_start_leftovers
from tests.acceptance.recorded import load
from tests.acceptance.report import Report
from tests.acceptance.run import parse_args, settings_from
from tests.acceptance.scenario import Live
from tests.acceptance.settings import Settings, drill_machine_type, load_run_stack, run_names, stack_values
from tests.acceptance.waiting import Clock
from tests.make_support import run_make

RUN_ID = "k3x9q2"
TENANT = f"acc-{RUN_ID}"
DECOY = f"rsv-gpu-acc-{RUN_ID}-missing-{TENANT}"
NEXT = "n1-standard-4-t4x1-us-central1-a"
START = datetime.fromisoformat("2026-11-30T13:12:20+00:00")  # the Job applied
SCHEMA = json.loads((Path(__file__).parent / "report.schema.json").read_text())


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- what the run declares -------------------------------------------------------------------------


def test_the_drill_puts_a_reservation_nobody_made_first_in_the_pool():
    settings = Settings(project="acme-acceptance", stockout_drill=True)
    machine = drill_machine_type(settings, RUN_ID)
    assert machine == "n1-standard-4"  # the run's pool's cheapest shape without the drill
    values = stack_values(settings, RUN_ID, machine)
    [pool] = values["gpu-platform:tenants"][0]["gpuPools"]
    assert pool["capacity"] == [{"reservation": "gpu-acc-k3x9q2-missing"}, "on-demand"]
    assert values["gpu-platform:nodeProvider"]["reservations"] == [
        {
            "name": "gpu-acc-k3x9q2-missing",
            "zone": "us-central1-a",
            "machineType": "n1-standard-4",
            "gpu": "nvidia-tesla-t4",  # an N1 host: the reservation names its guest GPUs
            "count": 1,
            "project": "acme-acceptance",
            "create": False,
            "slices": [{"tenant": TENANT, "count": 1}],
        }
    ]
    # In project mode the reservation is the team project's, where the tenant's VMs are.
    team = Settings(project="acme-acceptance", team_project="acme-acceptance-team", stockout_drill=True)
    assert stack_values(team, RUN_ID, machine)["gpu-platform:nodeProvider"]["reservations"][0]["project"] == "acme-acceptance-team"
    # A machine type with its GPUs built in names none.
    l4 = Settings(project="acme-acceptance", region="europe-west4", zones=("europe-west4-a", "europe-west4-b"), gpu="nvidia-l4", stockout_drill=True)
    l4_machine = drill_machine_type(l4, RUN_ID)
    assert l4_machine.startswith("g2-") and "gpu" not in stack_values(l4, RUN_ID, l4_machine)["gpu-platform:nodeProvider"]["reservations"][0]
    # With RESERVATION the decoy is in the reservation's zone, where the Job is pinned and the next option is.
    found = capacity_runs.Reservation("team-t4", "us-central1-b", "n1-standard-4", 2, "acme-acceptance", "nvidia-tesla-t4")
    both = Settings(project="acme-acceptance", stockout_drill=True, reservation="team-t4", reservation_found=found)
    assert both.decoy_zone == "us-central1-b" and drill_machine_type(both, RUN_ID) == "n1-standard-4"
    assert [r["zone"] for r in stack_values(both, RUN_ID, "n1-standard-4")["gpu-platform:nodeProvider"]["reservations"]] == ["us-central1-b"] * 2
    # Without a switch the run's configuration is the program's default, as before.
    plain = stack_values(Settings(project="acme-acceptance"), RUN_ID)
    assert "capacity" not in plain["gpu-platform:tenants"][0]["gpuPools"][0] and "reservations" not in plain["gpu-platform:nodeProvider"]


@pytest.mark.parametrize(
    "flex, reservation, expected, nxt",
    [
        (True, "", ["flex-start"], "flex-start"),
        (False, "team-t4", [{"reservation": "team-t4"}], "reservation"),
    ],
)
def test_flex_start_and_a_reservation_are_the_pools_only_option_and_the_drills_next(flex, reservation, expected, nxt):
    assert capacity_runs.capacity(False, flex, reservation, RUN_ID) == expected
    assert capacity_runs.capacity(True, flex, reservation, RUN_ID) == [{"reservation": capacity_runs.decoy_name(RUN_ID)}, *expected]
    assert capacity_runs.next_option(flex, reservation) == nxt
    if flex:
        values = stack_values(Settings(project="acme-acceptance", flex_start=True), RUN_ID)
        assert values["gpu-platform:nodeProvider"]["flexStart"] == {"maxRunDuration": capacity_runs.FLEX_START_MAX_RUN}


def test_the_drills_configuration_loads_with_the_programs_own_loader():
    env = load_run_stack(Settings(project="acme-acceptance", stockout_drill=True), RUN_ID)
    names = {nt.name for nt in env.tenants[0].gpu_pools[0].node_types}
    assert DECOY in names and NEXT in names
    decoy = next(nt for nt in env.tenants[0].gpu_pools[0].node_types if nt.name == DECOY)
    assert decoy.cost < min(nt.cost for nt in env.tenants[0].gpu_pools[0].node_types if nt.name != DECOY)


def test_a_reservation_is_read_as_gcloud_lists_it():
    listing = load("gcloud/fixture-reservations-list.json")
    found = capacity_runs.found_reservation(listing, "team-t4", "acme-acceptance", ("us-central1-a", "us-central1-b"))
    assert found == capacity_runs.Reservation("team-t4", "us-central1-b", "n1-standard-4", 2, "acme-acceptance", "nvidia-tesla-t4")
    assert found.declared(TENANT, 1) == {
        "name": "team-t4", "zone": "us-central1-b", "machineType": "n1-standard-4", "gpu": "nvidia-tesla-t4", "count": 2,
        "project": "acme-acceptance", "create": False, "slices": [{"tenant": TENANT, "count": 1}],
    }
    assert capacity_runs.found_reservation(listing, "other", "acme-acceptance", ("us-central1-b",)) == (
        "RESERVATION=other: 0 reservations of that name in project acme-acceptance; expected one"
    )
    assert capacity_runs.found_reservation(listing, "team-t4", "acme-acceptance", ("us-central1-a",)) == (
        "RESERVATION=team-t4 is in zone us-central1-b; ZONES must include it (now us-central1-a)"
    )
    full = json.loads(json.dumps(listing))
    full[0]["specificReservation"]["inUseCount"] = "2"
    assert capacity_runs.found_reservation(full, "team-t4", "acme-acceptance", ("us-central1-b",)) == "RESERVATION=team-t4 has no VM free (2 of 2 in use)"


def test_the_switches_reach_the_runner_and_are_off_by_default(tmp_path):
    plain = Settings(project="acme-acceptance")
    assert (plain.stockout_drill, plain.flex_start, plain.reservation) == (False, False, "")
    assert Report(RUN_ID, 10).to_json()["stockoutDrill"] is None
    args = ["--project", "acme-acceptance", "--stockout-drill", "--flex-start", "--reservation", " team-t4 "]
    settings = settings_from(parse_args(args))
    assert (settings.stockout_drill, settings.flex_start, settings.reservation) == (True, True, "team-t4")

    def make(*variables: str) -> list[str]:
        """What the runner gets from `make acceptance` (the Makefile run for real, tests/make_support.py)."""
        directory = tmp_path / str(len(list(tmp_path.iterdir())))
        directory.mkdir()
        run = run_make(directory, "acceptance", "PROJECT=acme-acceptance", *variables)
        assert run.returncode == 0 and run.created == set(), run.output
        return run.arguments

    assert "--stockout-drill" in make("STOCKOUT_DRILL=1") and "--stockout-drill" not in make()
    assert "--flex-start" in make("FLEX_START=1") and "--flex-start" not in make("STOCKOUT_DRILL=1")
    # A value reaches the runner as given, never run by the shell.
    arguments = make('RESERVATION=team-t4"; touch reservation; echo "')
    assert arguments[arguments.index("--reservation") + 1] == 'team-t4"; touch reservation; echo "'


@pytest.mark.parametrize(
    "settings, problem",
    [
        (Settings(project="acme-acceptance", warm_nodes=1, stockout_drill=True), "WARM_NODES=1 cannot be combined with STOCKOUT_DRILL, FLEX_START or RESERVATION"),
        (Settings(project="acme-acceptance", reservation="Team_T4"), "RESERVATION='Team_T4' is not a reservation name"),
    ],
)
def test_bad_capacity_settings_are_refused_before_anything(settings, problem):
    assert any(p.startswith(problem) for p in settings.problems()), settings.problems()


# --- the drill, replayed ------------------------------------------------------------------------------


class World:
    """The tenant's and the platform's answers as fake time passes: the Job's first claim fails on the
    decoy at t = 38 s, the capacity fallback asks for the next option at t = 45 s, Karpenter deletes
    the failed claim at t = 60 s and launches the next; the platform's failed claim goes at t = 300 s
    (`gone_at`, None: never)."""

    def __init__(self, *, fallback_asks: bool = True, gone_at: float | None = 300):
        self.t, self.fallback_asks, self.gone_at = 0.0, fallback_asks, gone_at
        self.calls: list[tuple[str, ...]] = []

    def now(self) -> datetime:
        return START + timedelta(seconds=self.t)

    def json(self, *args: str):  # the tenant
        self.calls.append(args)
        if args == ("get", "nodeclaims.karpenter.sh"):
            return load("kubectl/fixture-stockout-nodeclaims-failed.json" if self.t < 60 else "kubectl/fixture-stockout-nodeclaims-next.json")
        if args == ("get", "events", "-n", "default"):
            return load("kubectl/fixture-stockout-events.json") if self.fallback_asks and self.t >= 45 else {"kind": "List", "items": []}
        raise AssertionError(f"unexpected kubectl {args}")

    def host_json(self, *args: str):
        assert args == ("get", "nodeclaims.management.loft.sh", "-n", f"p-{TENANT}"), args
        failed = load("kubectl/fixture-stockout-platform-claims-failed.json")
        nxt = load("kubectl/fixture-stockout-platform-claims-next.json")
        gone = self.gone_at is not None and self.t >= self.gone_at
        return {"kind": "List", "items": ([] if gone else failed["items"]) + (nxt["items"] if self.t >= 60 else [])}

    def gcloud(self, *args: str):
        if args == ("compute", "instances", "list", f"--filter=labels.vcluster={TENANT}"):
            return load("gcloud/fixture-instances-list-stockout.json")
        assert args == ("compute", "disks", "list", f"--filter=labels.vcluster={TENANT}"), args
        return load("gcloud/fixture-disks-list-stockout.json")


class Answers:
    def __init__(self, answer):
        self.json = answer


def drill_live(world: World, tmp_path, **settings) -> Live:
    names = run_names(load_run_stack(Settings(project="acme-acceptance"), RUN_ID), RUN_ID)

    def sleep(seconds: float) -> None:
        world.t += seconds

    return Live(
        names=names,
        settings=Settings(project="acme-acceptance", stockout_drill=True, **settings),
        host=Answers(world.host_json),  # type: ignore[arg-type]
        gcloud=Answers(world.gcloud),  # type: ignore[arg-type]
        report=Report(RUN_ID, 10),
        workdir=tmp_path,
        gpu_machines={},
        say=lambda _: None,
        clock=Clock(monotonic=lambda: world.t, sleep=sleep, now=world.now),
    )


def run_drill(world: World, live: Live) -> StockoutDrill:
    """The Job waits 10 polls for its node while the drill reads every poll, then it runs."""
    drill = StockoutDrill(live, world)  # type: ignore[arg-type]
    for _ in range(10):
        world.t += 10
        drill.observe()
    live.report.mark("pod_created", START)
    live.report.mark("pod_started", at("2026-11-30T13:16:02+00:00"))
    drill.finish(load("kubectl/fixture-stockout-node.json"))
    return drill


def test_the_drill_records_the_failure_the_fallback_and_the_next_option(tmp_path):
    world = World()
    live = drill_live(world, tmp_path)
    run_drill(world, live)
    steps = live.report.stockout_drill
    assert [(s.name, s.ok, s.recorded_by) for s in steps] == [
        (f"stockout drill: the Job's first claim took the decoy {DECOY} and failed", True, "tenant API server"),
        ("stockout drill: the capacity fallback asked for the next option", True, "tenant API server"),
        ("stockout drill: the Job's pod runs on the next option (on-demand)", True, "tenant API server"),
        ("stockout drill: nothing of the failed claims left within 900 s", True, "polled"),
    ]
    failed, asked, landed, left = steps
    # What the tenant's and the platform's claims said, as they said it; each time by the server's clock.
    assert failed.at == at("2026-11-30T13:12:58+00:00")
    assert "tenant NodeClaim t4-1x-q8d4m (lists 2 node types): Launched LaunchFailed: creating nodeclaim" in failed.seen
    assert f"platform NodeClaim acc-k3x9q2-7tq2x ({DECOY}): phase Failed ProvisioningFailed tofu apply: Error creating instance" in failed.seen
    assert asked.at == at("2026-11-30T13:13:05+00:00") and asked.seen.startswith("GPUOptionFailed: NodeClaim t4-1x-q8d4m")
    assert landed.seen == f"node dev-acc-k3x9q2-t4-1x-w2c7n-6e1d0a: node type {NEXT}, gpu-platform/capacity-type on-demand, 222 s after the pod was created"
    assert landed.at == at("2026-11-30T13:16:02+00:00")
    # The platform's failed claim went at t = 300 s: the last step waited for it, and saw no VM or disk of it.
    assert left.seen == "failed platform claims ['acc-k3x9q2-7tq2x']: VMs none, disks none, claims still in the platform none"
    assert timedelta(seconds=300) <= left.at - START < timedelta(seconds=300 + 15 + 1)
    assert live.report.checks_passed
    document = live.report.to_json()
    jsonschema.validate(document, SCHEMA)
    assert [step["step"] for step in document["stockoutDrill"]] == [s.name for s in steps]
    assert "### Stockout drill" in live.report.render()


def test_a_fallback_that_never_asks_and_a_claim_that_stays_fail_the_drill(tmp_path):
    world = World(fallback_asks=False, gone_at=None)
    live = drill_live(world, tmp_path)
    run_drill(world, live)
    ok = [s.ok for s in live.report.stockout_drill]
    assert ok == [True, False, True, False]
    assert live.report.stockout_drill[1].seen == f"no GPUOptionFailed event naming {DECOY}; its events: none"
    assert live.report.stockout_drill[3].seen.endswith("claims still in the platform ['acc-k3x9q2-7tq2x (phase Failed)'] (waited up to 900 s)")
    # It waited out the bound for the claim to go, no longer.
    assert world.t == pytest.approx(100 + capacity_drill.LEFTOVER_TIMEOUT, abs=16)
    assert not live.report.checks_passed


def test_a_job_that_lands_on_the_decoy_or_elsewhere_is_not_the_next_option():
    node = load("kubectl/fixture-stockout-node.json")
    labels = node["metadata"]["labels"]
    assert capacity_drill.landed(node, DECOY, "on-demand", START, START + timedelta(seconds=90)).ok
    labels["vcluster.com/node-type"] = DECOY
    assert not capacity_drill.landed(node, DECOY, "on-demand", START, None).ok
    labels["vcluster.com/node-type"], labels["gpu-platform/capacity-type"] = NEXT, "spot"
    step = capacity_drill.landed(node, DECOY, "on-demand", START, None)
    assert not step.ok and step.at is None and "gpu-platform/capacity-type spot" in step.seen


def test_a_claim_from_before_the_job_is_not_the_jobs():
    watch = capacity_drill.Watch("acc-k3x9q2", TENANT, at("2026-11-30T13:13:00+00:00"))
    watch.observe(load("kubectl/fixture-stockout-nodeclaims-failed.json"), load("kubectl/fixture-stockout-platform-claims-failed.json"), {"items": []}, START)
    assert watch.tenant_claims == {} and watch.platform_claims == {}
    step = capacity_drill.claim_failed(watch, DECOY)
    assert not step.ok and step.seen == f"no claim for the Job named the decoy node type {DECOY}"


# --- the Flex-start and reservation runs ----------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture, settings, expected",
    [
        ("gcloud/fixture-instances-list-flex-start.json", {"flex_start": True}, [("the GPU VM is Flex-start", True)]),
        ("gcloud/fixture-instances-list-stockout.json", {"flex_start": True}, [("the GPU VM is Flex-start", False)]),
        ("gcloud/fixture-instances-list-reserved.json", {"reservation": "team-t4"}, [("the GPU VM consumes reservation team-t4", True)]),
        ("gcloud/fixture-instances-list-reserved.json", {"reservation": "other"}, [("the GPU VM consumes reservation other", False)]),
    ],
)
def test_the_jobs_vm_says_how_it_was_bought(tmp_path, fixture, settings, expected):
    [vm] = load(fixture)
    live = drill_live(World(), tmp_path, **settings)
    check_capacity_vm(live, vm)
    assert [(f.check, f.ok) for f in live.report.findings] == expected
    if settings.get("flex_start"):
        assert "provisioningModel" in live.report.findings[0].detail and "configured 7200" in live.report.findings[0].detail


def test_a_flex_start_vm_that_backs_no_node_after_the_claim_ended_is_reported_with_its_delete_command(tmp_path):
    """FLEX_START=1: once the Job's node is gone, a Flex-start VM of the tenant that backs no node is
    one the provider stopped waiting for (templates/node/main.tf `timeouts`): in no state, nothing
    deletes it. Read from gcloud's and kubectl's own listings."""
    flex = load("gcloud/fixture-instances-list-flex-start.json")
    node = load("kubectl/fixture-stockout-node.json")
    assert capacity_runs.untracked_flex_start_vms(flex, [node], project="acme-acceptance")[1] is True
    assert capacity_runs.untracked_flex_start_vms(load("gcloud/fixture-instances-list-stockout.json"), [], project="acme-acceptance")[1] is True  # not Flex-start

    class Tenant:
        def json(self, *args: str):
            assert args == ("get", "nodes"), args
            return {"kind": "List", "items": []}  # the Job's node went with its claim

    world = World()
    world.gcloud = lambda *args: flex  # type: ignore[method-assign]
    live = drill_live(world, tmp_path, flex_start=True)
    check_flex_start_leftovers(live, Tenant())  # type: ignore[arg-type]
    [finding] = live.report.findings
    assert (finding.check, finding.ok) == ("no Flex-start VM left behind its ended claim", False)
    assert finding.detail == (
        "Flex-start VM(s) backing no node: dev-acc-k3x9q2-t4-1x-w2c7n-6e1d0a (in no state; delete: gcloud compute instances delete "
        "dev-acc-k3x9q2-t4-1x-w2c7n-6e1d0a --project acme-acceptance --zone us-central1-a)"
    )


def test_nodeclaims_not_served_or_not_listable_by_the_fallback_fail_the_check():
    listing, account = load("kubectl/fixture-nodeclaims-job.json"), "system:serviceaccount:gpu-platform-capacity:gpu-capacity-fallback"
    node = {"metadata": {"name": "acc-k3x9q2-gpu-8w2mf-3f9a1c"}}
    assert capacity_drill.claims_visible(listing, node, "yes\n", account)[1] is True
    assert capacity_drill.claims_visible(listing, node, "no (exit 1)", account)[1] is False
    assert capacity_drill.claims_visible({"items": []}, node, "yes", account)[1] is False
    assert capacity_drill.claims_visible(listing, {"metadata": {"name": "other"}}, "yes", account)[2] == f"1 listed, none for node other; {account} may list them: yes"


def test_the_docs_say_what_the_drill_declares_and_waits_for():
    from docs_support import page

    text = " ".join(page("docs/acceptance.md").split())
    assert f"(`{capacity_runs.decoy_name('<id>')}`, in the first of `ZONES` or `RESERVATION`'s zone, `create: false`)" in text
    assert f"and within {capacity_drill.LEFTOVER_TIMEOUT} s, nothing of the failed claims left" in text
    assert f"the run waits up to {capacity_drill.LEFTOVER_TIMEOUT} s more for the failed claims to go" in text
    assert f"(`capacity: [flex-start]`, a maximum run of {capacity_runs.FLEX_START_MAX_RUN})" in text


def test_without_a_node_for_the_job_the_drill_still_records_what_it_saw(tmp_path):
    """The scenario calls finish with no node when the Job never got one (its CheckFailed): the claim's
    failure, the fallback's event and the leftovers are still recorded; no step says where it landed."""
    world = World()
    live = drill_live(world, tmp_path)
    drill = StockoutDrill(live, world)  # type: ignore[arg-type]
    for _ in range(10):
        world.t += 10
        drill.observe()
    drill.finish(None)
    assert [s.ok for s in live.report.stockout_drill] == [True, True, True]
    assert not any("runs on the next option" in s.name for s in live.report.stockout_drill)
