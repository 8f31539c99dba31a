"""Run the real program (__main__.py) under Pulumi's mock engine and record what it registers.

Used by the offline plan, the benchmarks and the tests. The SDK, the providers' Python SDKs and the
program all run for real; only the engine and the cloud are replaced. Values the cloud would
compute (endpoints, IDs, another stack's outputs) come back as placeholders
that contain the word "placeholder", so nobody mistakes them for real values.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import ipaddress
import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from config import stack_files
from config.stack_files import PROJECT_DIR, SecureValue

PLACEHOLDER = "placeholder"
# Static external (NAT) addresses are picked by Google; the mock hands them out of TEST-NET-2, a
# documentation-only range (RFC 5737: never routed), since they must read as addresses where the
# program uses them (the control plane's loadBalancerSourceRanges). The plan's legend names it.
MOCK_ADDRESS_RANGE = "198.51.100.0/24"
MAIN = PROJECT_DIR / "__main__.py"


@dataclass
class Registration:
    """One resource as the program registered it."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    encoded_inputs: Any  # the protobuf Struct as registered, decoded on first use (see `inputs`)
    protect: bool
    deleted_with: str
    ignore_changes: list[str]
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    retain_on_delete: bool = False
    encoded_outputs: Any = None  # the mock provider's state for it (PlatformMocks), decoded on first use
    # Its aliases as the SDK sent them: {"urn": …} or a spec {"name", "type", "parentUrn", "noParent", …}
    # with only the fields set (tools/plan_compare.py resolves them as the engine does).
    aliases: list[dict[str, Any]] = field(default_factory=list)

    @functools.cached_property
    def outputs(self) -> dict[str, Any]:
        """What the mock provider returned: the scalar inputs echoed and what the cloud would
        compute (addresses, e-mails, …), secrets still wrapped."""
        return rpc.deserialize_properties(self.encoded_outputs) if self.encoded_outputs is not None else {}

    @property
    def final_state(self) -> dict[str, Any]:
        """Inputs and outputs together, plain: a resource as the engine hands it to stack policies
        after `pulumi up` (its final outputs, which a provider's state holds with its inputs)."""
        return plain({**self.inputs, **self.outputs})

    @functools.cached_property
    def inputs(self) -> dict[str, Any]:
        """The inputs, secrets still wrapped (see `plain` and `is_secret`). Kept encoded until
        asked for: thousands of decoded specs would only give the garbage collector more to scan."""
        return rpc.deserialize_properties(self.encoded_inputs)

    @property
    def plain_inputs(self) -> dict[str, Any]:
        return plain(self.inputs)

    def input(self, *path: str) -> Any:
        value: Any = self.plain_inputs
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def is_secret(self, key: str) -> bool:
        return contains_secret(self.inputs.get(key))


def plain(value: Any) -> Any:
    """Unwrap Pulumi's secret markers, recursively."""
    if rpc.is_rpc_secret(value):
        return plain(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def contains_secret(value: Any) -> bool:
    if rpc.is_rpc_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secret(v) for v in value)
    return False


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, also keeping parent, provider and dependency edges."""

    def __init__(self, mocks: pulumi_mocks.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.reads: list[Registration] = []

    def ReadResource(self, request):
        """A resource the program reads (a StackReference), kept apart from what it registers for the
        stack policies, which the engine hands reads too (pulumi/pulumi commit 1b5949891b3c:
        step_executor.go stores every step's new state in the `news` step_generator.go
        AnalyzeResources passes on)."""
        response = super().ReadResource(request)
        fields = dict(parent=request.parent, provider=request.provider, dependencies=list(request.dependencies), property_dependencies={})
        self.reads.append(
            Registration(response.urn, request.type, request.name, custom=True, encoded_inputs=request.properties, protect=False,
                         deleted_with="", ignore_changes=[], encoded_outputs=response.properties, **fields)  # fmt: skip
        )
        return response

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(
                Registration(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    custom=bool(request.custom),
                    provider=request.provider,
                    dependencies=list(request.dependencies),
                    property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                    encoded_inputs=request.object,
                    protect=bool(request.protect),
                    deleted_with=request.deletedWith,
                    ignore_changes=list(request.ignoreChanges),
                    replace_on_changes=list(request.replaceOnChanges),
                    delete_before_replace=bool(request.deleteBeforeReplace),
                    retain_on_delete=bool(request.retainOnDelete),
                    encoded_outputs=response.object if request.custom else None,
                    aliases=_aliases(request),
                )
            )
        return response


def _aliases(request) -> list[dict[str, Any]]:
    """The request's aliases (pulumi/pulumi proto/pulumi/resource.proto `RegisterResourceRequest`):
    `aliases`, alias specs or URNs (the mock monitor supports specs, so the SDK sends those), and
    `aliasURNs` from an SDK that computes them itself."""
    found: list[dict[str, Any]] = [{"urn": urn} for urn in request.aliasURNs]
    for alias in request.aliases:
        if alias.WhichOneof("alias") == "urn":
            found.append({"urn": alias.urn})
        else:
            spec = alias.spec
            fields = {"name": spec.name, "type": spec.type, "stack": spec.stack, "project": spec.project}
            parent = spec.WhichOneof("parent")
            if parent == "parentUrn":
                fields["parentUrn"] = spec.parentUrn
            elif parent == "noParent":
                fields["noParent"] = spec.noParent
            found.append({k: v for k, v in fields.items() if v})
    return found


class PlatformMocks(pulumi_mocks.Mocks):
    """Outputs for the resource types this program reads back, everything else echoes its inputs."""

    def __init__(self, stack_outputs: dict[str, dict[str, Any]] | None = None):
        # StackReference name → its outputs (a tenant stack's environment).
        self.stack_outputs = stack_outputs or {}

    def new_resource(self, args: pulumi_mocks.MockResourceArgs):
        # Echo scalar inputs as outputs, as a provider would; the program never reads nested input
        # objects back (NodeProvider and instance specs), and copying them would only cost time.
        state = {k: v for k, v in args.inputs.items() if not isinstance(v, (dict, list)) or rpc.is_rpc_secret(v)}
        typ, inputs = args.typ, args.inputs
        resource_id = f"{args.name}-{PLACEHOLDER}-id"
        project = inputs.get("project", f"{PLACEHOLDER}-project")
        if typ == "pulumi:pulumi:StackReference":
            name = inputs.get("name", args.name)
            if name not in self.stack_outputs:
                raise KeyError(f"no outputs for stack reference {name!r}")
            state["outputs"] = self.stack_outputs[name]
            state["secretOutputNames"] = [k for k in ("kubeconfig",) if k in self.stack_outputs[name]]
        elif typ == "gcp:container/cluster:Cluster":
            location = inputs.get("location", "")
            state["endpoint"] = "203.0.113.10"  # TEST-NET-3: a documentation address, never real
            state["masterAuth"] = {**(inputs.get("masterAuth") or {}), "clusterCaCertificate": f"{PLACEHOLDER}-ca-certificate"}
            state["controlPlaneEndpointsConfig"] = {
                "dnsEndpointConfig": {
                    "allowExternalTraffic": True,
                    "endpoint": f"gke-{PLACEHOLDER}-dns-endpoint.{location}.gke.goog",
                }
            }
        elif typ == "gcp:serviceaccount/account:Account":
            email = f"{inputs['accountId']}@{project}.iam.gserviceaccount.com"
            state.update(email=email, name=f"projects/{project}/serviceAccounts/{email}", uniqueId=f"{PLACEHOLDER}-unique-id")
        elif typ == "gcp:projects/iAMCustomRole:IAMCustomRole":
            state["name"] = f"projects/{project}/roles/{inputs['roleId']}"
        elif typ in ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork", "gcp:compute/router:Router"):
            kind = typ.split(":")[-1].lower() + "s"
            scope = "global" if kind == "networks" else f"regions/{inputs.get('region', '')}"
            resource_id = f"projects/{project}/{scope}/{kind}/{inputs.get('name', args.name)}"
            state["selfLink"] = f"https://www.googleapis.com/compute/v1/{resource_id}"
        elif typ == "gcp:compute/address:Address":
            # A static external address is picked by Google at creation. The mock hands out one of
            # MOCK_ADDRESS_RANGE, derived from the address's project, region and name so that runs agree.
            region, name = inputs.get("region", ""), inputs.get("name", args.name)
            digest = hashlib.sha256(f"{project}/{region}/{name}".encode()).digest()
            state["address"] = str(ipaddress.IPv4Network(MOCK_ADDRESS_RANGE)[1 + digest[0] % 254])
            resource_id = f"projects/{project}/regions/{region}/addresses/{name}"
            state["selfLink"] = f"https://www.googleapis.com/compute/v1/{resource_id}"
        elif typ == "gcp:organizations/project:Project":
            state["number"] = f"{PLACEHOLDER}-project-number"
            resource_id = f"projects/{inputs.get('projectId', args.name)}"
        elif typ in ("gcp:iam/workloadIdentityPool:WorkloadIdentityPool", "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider"):
            # Named by the project's NUMBER, which only the cloud knows.
            pool = f"projects/{PLACEHOLDER}-project-number/locations/global/workloadIdentityPools/{inputs['workloadIdentityPoolId']}"
            provider = inputs.get("workloadIdentityPoolProviderId")
            state["name"] = f"{pool}/providers/{provider}" if provider else pool
        elif typ == "kubernetes:helm.sh/v3:Release":
            state["status"] = {"status": "deployed", "version": inputs.get("version"), "namespace": inputs.get("namespace")}
        return resource_id, state

    def call(self, args: pulumi_mocks.MockCallArgs):
        return {}


@dataclass
class ProgramRun:
    stack: str
    registrations: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    reads: list[Registration] = field(default_factory=list)  # resources it read (StackReferences)

    def of_type(self, typ: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == typ]

    def one(self, typ: str, name_contains: str = "") -> Registration:
        found = [r for r in self.of_type(typ) if name_contains in r.name]
        if len(found) != 1:
            raise LookupError(f"expected one {typ} named *{name_contains}*, found {[r.name for r in found]}")
        return found[0]

    def by_urn(self) -> dict[str, Registration]:
        return {r.urn: r for r in self.registrations}

    def children(self, parent_urn: str) -> list[Registration]:
        return [r for r in self.registrations if r.parent == parent_urn]

    def depends_on(self, urn: str) -> set[str]:
        """Every resource `urn` waits for: its dependencies, their dependencies, and so on.
        A component counts as its whole subtree, as in the engine."""
        index = self.by_urn()
        seen: set[str] = set()
        todo = list(_direct_edges(index[urn]))
        while todo:
            current = todo.pop()
            if current in seen or current not in index:
                continue
            seen.add(current)
            todo.extend(_direct_edges(index[current]))
            todo.extend(r.urn for r in self.children(current))
        return seen

    def custom_descendants(self, urn: str) -> set[str]:
        """The custom resources inside a component (its whole subtree); a custom resource is itself."""
        index, children = self.by_urn(), self._children_index()
        return _custom_closure(urn, index, children)

    def longest_chain(self) -> list[Registration]:
        """The longest chain of resources a deployment creates one after another, first to last.

        Each resource in it waits for the one before it: a dependency, a property dependency or its
        provider, where waiting for a component means waiting for every resource inside it (as in
        the engine). Components do no work of their own and are not counted. Its length is a lower
        bound on the number of sequential cloud operations of a `pulumi up`.
        """
        index, children = self.by_urn(), self._children_index()
        closure: dict[str, set[str]] = {}
        prerequisites: dict[str, set[str]] = {}
        for r in self.registrations:
            if not r.custom:
                continue
            waits: set[str] = set()
            for edge in _direct_edges(r):
                if edge not in closure:
                    closure[edge] = _custom_closure(edge, index, children)
                waits |= closure[edge]
            waits.discard(r.urn)
            prerequisites[r.urn] = waits
        depth: dict[str, int] = {}
        before: dict[str, str | None] = {}
        for start in prerequisites:
            # Iterative depth-first search: no recursion limit however long the chain.
            stack: list[tuple[str, bool]] = [(start, False)]
            on_path: set[str] = set()
            while stack:
                urn, done = stack.pop()
                if urn in depth:
                    continue
                if done:
                    on_path.discard(urn)
                    best = max(prerequisites[urn], key=lambda u: (depth.get(u, 0), u), default=None)
                    depth[urn] = 1 + (depth[best] if best is not None else 0)
                    before[urn] = best
                    continue
                if urn in on_path:
                    raise ValueError(f"dependency cycle through {urn}")
                on_path.add(urn)
                stack.append((urn, True))
                stack.extend((u, False) for u in prerequisites[urn] if u not in depth)
        if not depth:
            return []
        last: str | None = max(depth, key=lambda u: (depth[u], u))
        chain = []
        while last is not None:
            chain.append(index[last])
            last = before[last]
        return chain[::-1]

    def _children_index(self) -> dict[str, list[str]]:
        children: dict[str, list[str]] = {}
        for r in self.registrations:
            children.setdefault(r.parent, []).append(r.urn)
        return children


def _custom_closure(urn: str, index: dict[str, Registration], children: dict[str, list[str]]) -> set[str]:
    found: set[str] = set()
    todo = [urn]
    while todo:
        current = todo.pop()
        r = index.get(current)
        if r is None:
            continue
        if r.custom:
            found.add(current)
        else:
            todo.extend(children.get(current, ()))
    return found


def _direct_edges(r: Registration) -> set[str]:
    edges = set(r.dependencies)
    for urns in r.property_dependencies.values():
        edges.update(urns)
    if r.provider:  # "<provider urn>::<provider id>"
        edges.add(r.provider.rsplit("::", 1)[0])
    return edges


class _WarningCollector:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def debug(self, msg: str) -> None:
        pass

    info = debug

    def warning(self, msg: str) -> None:
        self.messages.append(msg)

    def error(self, msg: str) -> None:
        self.messages.append(msg)


async def _resolve(value: Any) -> tuple[Any, bool]:
    """A stack output's value and whether it is secret. Walks plain lists and dicts and awaits only
    the Outputs inside (Output.from_input would wrap every leaf of a large export)."""
    if isinstance(value, pulumi.Output):
        inner, secret = await _resolve(await value.future())
        return inner, secret or await value.is_secret()
    if isinstance(value, dict):
        items = [(k, await _resolve(v)) for k, v in value.items()]
        return {k: v for k, (v, _) in items}, any(s for _, (_, s) in items)
    if isinstance(value, (list, tuple)):
        items = [await _resolve(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


def _give_thread_a_loop(loops: list[asyncio.AbstractEventLoop]) -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loops.append(loop)


def _ignore_unretrieved_program_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """When the program fails (e.g. a RunError from a check inside an apply), every output that
    depended on the failing one holds the same error and is garbage-collected unread. The error
    was already raised to the caller; don't print it once per output."""
    if isinstance(context.get("exception"), pulumi.RunError) and "never retrieved" in context.get("message", ""):
        return
    loop.default_exception_handler(context)


def config_strings(values: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Stack values as the engine hands them to a program: strings, structured values as JSON,
    and the list of secret keys. Encrypted values get a placeholder plaintext."""
    strings, secret_keys = {}, []
    for key, value in values.items():
        if isinstance(value, SecureValue):
            strings[key] = f"{PLACEHOLDER}-decrypted-secret"
            secret_keys.append(key)
        elif isinstance(value, (dict, list)):
            strings[key] = json.dumps(value, default=str)
        elif isinstance(value, bool):
            strings[key] = "true" if value else "false"
        elif value is None:
            strings[key] = ""  # a key left blank: the CLI hands the program an empty string
        else:
            strings[key] = str(value)
    return strings, secret_keys


def run_program(
    values: dict[str, Any],
    *,
    stack: str,
    stack_outputs: dict[str, dict[str, Any]] | None = None,
    main: Path = MAIN,
    program: Callable[[], Any] | None = None,
    project: str = "gpu-platform",
    preview: bool = False,
    project_dir: Path | None = None,
) -> ProgramRun:
    """Evaluate the program for one stack's configuration. Raises what the program raises
    (e.g. pulumi.RunError with the configuration problems).

    `project_dir`: where the program finds Pulumi.yaml and the other stack files (tenant-stack
    checks read them), for a project copied elsewhere; default this repository. The program's
    code, catalog and templates are always this repository's."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_ignore_unretrieved_program_errors)
    # The SDK calls the mock monitor from executor threads, and the monitor gives each thread an
    # event loop of its own; create those here so they can be closed when the run ends.
    thread_loops: list[asyncio.AbstractEventLoop] = []
    executor = concurrent.futures.ThreadPoolExecutor(initializer=_give_thread_a_loop, initargs=(thread_loops,))
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    collector = _WarningCollector()
    mocks = PlatformMocks(stack_outputs)
    monitor = RecordingMonitor(mocks)
    try:
        settings.ROOT.set(None)
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor, logger=collector)  # type: ignore[arg-type]
        strings, secret_keys = config_strings(values)
        pulumi.runtime.set_all_config(strings, secret_keys)
        settings.SETTINGS.rpc_manager.clear()
        settings.SETTINGS.outputs.clear()
        run = program or (lambda: runpy.run_path(str(main), run_name="__main__"))
        try:
            with _program_project_dir(project_dir):
                _sync_await(run_pulumi_func(run))
        except BaseException as e:
            # What got registered before the failure, for "nothing was created" assertions.
            e.registrations = monitor.registrations  # type: ignore[attr-defined]
            raise
        root = settings.get_root_resource()
        outputs, secret = {}, set()
        for name, value in (root.outputs if root is not None else {}).items():  # type: ignore[attr-defined]
            outputs[name], is_secret = _sync_await(_resolve(value))
            if is_secret:
                secret.add(name)
        return ProgramRun(stack, monitor.registrations, outputs, secret, collector.messages, monitor.reads)
    finally:
        settings.ROOT.set(None)
        # A failed program leaves registrations waiting on outputs that will never resolve.
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
        executor.shutdown(wait=True)
        for thread_loop in thread_loops:
            thread_loop.close()
        asyncio.set_event_loop(None)


@contextlib.contextmanager
def _program_project_dir(project_dir: Path | None):
    """__main__.py takes its project directory from `config.stack_files.PROJECT_DIR` when it runs;
    point that at `project_dir` for the duration of one evaluation."""
    if project_dir is None or Path(project_dir).resolve() == stack_files.PROJECT_DIR:
        yield
        return
    previous = stack_files.PROJECT_DIR
    stack_files.PROJECT_DIR = Path(project_dir).resolve()
    try:
        yield
    finally:
        stack_files.PROJECT_DIR = previous
