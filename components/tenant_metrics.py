"""Metrics in Prometheus' text exposition format, served over HTTP by a program that runs inside a
tenant (the capacity fallback, components/capacity_fallback.py) for the tenant's GPU metrics
collector to scrape (components/monitoring_documents.py). Standard library only: shipped byte for
byte beside the program (its ConfigMap) and imported from the same directory.

The format: `# HELP` and `# TYPE` lines, then one `name{label="value",...} value` line per series,
label values with backslash, double quote and newline escaped
(https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Registry:
    """Counters and gauges by name: `metrics` gives each its type, help and label names."""

    def __init__(self, metrics: dict[str, tuple[str, str, tuple[str, ...]]]):
        self.metrics = metrics
        self.values: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in metrics}
        self.lock = threading.Lock()

    def add(self, name: str, labels: tuple[str, ...], amount: int = 1) -> None:
        """A counter's series goes up."""
        with self.lock:
            series = self.values[name]
            series[labels] = series.get(labels, 0) + amount

    def set(self, name: str, series: dict[tuple[str, ...], float]) -> None:
        """A gauge's series, all of them: a series not given is gone."""
        with self.lock:
            self.values[name] = dict(series)

    def render(self) -> str:
        with self.lock:
            lines = []
            for name, (kind, help_text, labels) in self.metrics.items():
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
                for key, value in sorted(self.values[name].items()):
                    pairs = ",".join(f'{label}="{_escape(v)}"' for label, v in zip(labels, key))
                    lines.append(f"{name}{{{pairs}}} {value:g}" if isinstance(value, int) else f"{name}{{{pairs}}} {value:.3f}")
            return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def serve(registry: Registry, port: int) -> ThreadingHTTPServer:
    """GET /metrics on every address of the pod, on `port`, from a thread of its own."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server interface
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = registry.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # the collector scrapes every interval: no line per scrape
            pass

    server = ThreadingHTTPServer(("", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
