"""CLI paths that printed a traceback: now one ``error:`` line on stderr and exit 2 (bad input or
options, checked before anything runs) or 1 (runtime failure: the API server does not answer).
Each test failed before the fix (issue 10, section 4)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.cli import invoke_cli

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def no_kube_env(monkeypatch, tmp_path):
    """No $KUBECONFIG, an empty home, not in a pod."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unreachable_kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{closed_port()}", insecure-skip-tls-verify: true}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
users: [{{name: u, user: {{token: not-a-secret}}}}]
""")
    return str(path)


def loopback_kubeconfig(directory: Path, port: int, scheme: str = "http") -> str:
    """A kubeconfig (path) for a test server on ``scheme``://127.0.0.1:``port``."""
    path = directory / "kubeconfig"
    path.write_text(f"""\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{scheme}://127.0.0.1:{port}"}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
users: [{{name: u, user: {{token: not-a-secret}}}}]
""")
    return str(path)


run = invoke_cli


def one_line_error(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("command", [["install-crds"], ["controller", "--cloud-provider", "simulated"]])
def test_no_kubeconfig_at_all(no_kube_env, command):
    result = run(*command)
    assert result.exit_code == 2
    assert one_line_error(result).startswith("error: no kubeconfig: give --kubeconfig FILE or set $KUBECONFIG")


@pytest.mark.parametrize("command", [["install-crds"], ["controller", "--cloud-provider", "simulated"]])
def test_missing_kubeconfig_file(no_kube_env, command):
    missing = no_kube_env / "nope.yaml"
    result = run(*command, "--kubeconfig", str(missing))
    assert result.exit_code == 2
    assert one_line_error(result) == f"error: --kubeconfig {missing}: no such file"


def test_missing_kubeconfig_from_the_environment(no_kube_env, monkeypatch):
    missing = no_kube_env / "env.yaml"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    result = run("install-crds")
    assert result.exit_code == 2 and one_line_error(result) == f"error: $KUBECONFIG {missing}: no such file"


def test_malformed_kubeconfig(no_kube_env):
    bad = no_kube_env / "bad.yaml"
    bad.write_text("{bad\n")
    result = run("install-crds", "--kubeconfig", str(bad))
    assert result.exit_code == 2 and one_line_error(result).startswith(
        f"error: cannot use {bad}: not valid kubeconfig YAML: line 2 column 1: while parsing a flow mapping")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", [["install-crds"],
                                     ["controller", "--cloud-provider", "simulated", "--no-leader-elect",
                                      "--health-host", "127.0.0.1", "--health-port", "0", "--metrics-port", "0"]])
def test_unreachable_api_server_is_exit_1_at_once(no_kube_env, command):
    kubeconfig = unreachable_kubeconfig(no_kube_env)
    started = time.monotonic()
    result = run(*command, "--kubeconfig", kubeconfig)
    assert result.exit_code == 1
    assert one_line_error(result).startswith("error: cannot reach the Kubernetes API server at https://127.0.0.1:")
    assert time.monotonic() - started < 30  # the controller used to retry its watches forever


def test_unknown_cloud_provider_is_refused_before_connecting(no_kube_env):
    # with an unreachable server, connecting first would have answered about the server
    result = run("controller", "--cloud-provider", "nosuch", "--kubeconfig", unreachable_kubeconfig(no_kube_env))
    assert result.exit_code == 2
    assert one_line_error(result).startswith("error: --cloud-provider 'nosuch' is not installed; installed: ")
    assert "simulated" in result.stderr


def test_kwok_with_another_provider_is_refused_before_connecting(no_kube_env):
    result = run("controller", "--cloud-provider", "aws", "--kwok", "--kubeconfig", unreachable_kubeconfig(no_kube_env))
    assert result.exit_code == 2 and one_line_error(result) == "error: --kwok works with --cloud-provider simulated only"


@pytest.mark.timeout(60)
def test_timeline_into_a_missing_directory_is_refused_before_the_run(tmp_path):
    target = tmp_path / "missing" / "timeline.png"
    started = time.monotonic()
    result = run("simulate", str(DATA / "scenarios" / "scale-down.yaml"), "--timeline", str(target))
    assert result.exit_code == 2
    assert one_line_error(result) == f"error: --timeline {target}: directory {target.parent} does not exist"
    assert result.stdout == ""  # refused before the run: no report printed
    assert time.monotonic() - started < 10


def test_timeline_that_is_a_directory_is_refused(tmp_path):
    result = run("simulate", str(DATA / "scenarios" / "scale-down.yaml"), "--timeline", str(tmp_path))
    assert result.exit_code == 2 and "is a directory" in one_line_error(result)


def test_timeline_in_an_unknown_image_format_is_refused_before_the_run(tmp_path):
    target = tmp_path / "out.txt"
    result = run("simulate", str(DATA / "scenarios" / "scale-down.yaml"), "--timeline", str(target))
    assert result.exit_code == 2 and result.stdout == ""
    assert one_line_error(result) == (f"error: --timeline {target}: cannot write a .txt image; use one of .png, .svg, .pdf "
                                      "(no extension: PNG)")


def test_timeline_without_an_extension_is_a_png_at_exactly_that_path(tmp_path):
    target = tmp_path / "out"
    result = run("simulate", str(DATA / "scenarios" / "scale-down.yaml"), "--until", "3h", "--timeline", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"timeline: {target}"
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("until", ["2562047h", "8785h"])
def test_until_beyond_a_year_is_refused(until, tmp_path):
    result = run("simulate", str(DATA / "scenarios" / "scale-down.yaml"), "--until", until)
    assert result.exit_code == 2
    assert one_line_error(result) == f"error: --until: {until!r} is more than the 8784h (366 days) a simulation may run"
    (tmp_path / "base.yaml").write_text((DATA / "scenarios" / "base.yaml").read_text())
    scenario = tmp_path / "long.yaml"
    scenario.write_text((DATA / "scenarios" / "scale-down.yaml").read_text().replace("until: 6h", f"until: {until}", 1))
    result = run("validate", str(scenario))
    assert result.exit_code == 2 and "is more than the 8784h (366 days)" in result.stderr


def test_validate_refuses_what_the_simulation_cap_refuses(tmp_path):
    app = tmp_path / "app.yaml"
    app.write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata: {name: huge}
spec:
  replicas: 200000
  selector: {matchLabels: {app: huge}}
  template:
    metadata: {labels: {app: huge}}
    spec: {containers: [{name: c, image: x}]}
""")
    for command in ("validate", "simulate"):
        result = run(command, str(app))
        assert result.exit_code == 2, command
        assert "huge" in result.stderr, command
        assert ("spec.replicas: 200,000 pods; the simulation would hold 200,000 pods, "
                "more than its cap of 100,000") in result.stderr, command


@pytest.fixture
def failing_api_server(no_kube_env):
    """A loopback HTTP server answering every request with 500, and a kubeconfig pointing at it."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = b"<html>oops</html>"
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield loopback_kubeconfig(no_kube_env, server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", [["install-crds"],
                                     ["controller", "--cloud-provider", "simulated", "--no-leader-elect",
                                      "--health-host", "127.0.0.1", "--health-port", "0", "--metrics-port", "0"]])
def test_an_api_server_answering_errors_is_a_runtime_failure(failing_api_server, command):
    result = run(*command, "--kubeconfig", failing_api_server)
    assert result.exit_code == 1
    assert one_line_error(result).startswith("error: the Kubernetes API server answered 500")


def test_json_report_with_an_explicit_timeline_writes_it_and_keeps_stdout_json(tmp_path):
    import json

    target = tmp_path / "timeline.png"
    result = run("simulate", str(DATA / "scenarios" / "scale-down.yaml"), "-o", "json", "--timeline", str(target))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["cost_over_time"]  # stdout is the JSON report alone
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"timeline: {target}" in result.stderr


def test_a_log_output_path_that_cannot_be_opened_is_one_error_line(no_kube_env, tmp_path):
    target = tmp_path / "missing" / "karpy.log"
    result = run("controller", "--cloud-provider", "simulated", "--log-output-paths", str(target))
    assert result.exit_code == 2
    assert one_line_error(result) == (f"error: LOG_OUTPUT_PATHS (--log-output-paths): cannot open {target}: "
                                      "No such file or directory")


def test_an_api_server_answering_an_error_page_exits_1_naming_the_request(no_kube_env):
    """Found by the fresh-user trial: a server answering 403 with an HTML page (a proxy, a wrong
    endpoint) exited 2 (the code of bad input) and printed the whole page. It is a run-time
    failure: exit 1, one line naming the request, a short preview of the body."""
    import http.server
    import threading

    class Forbidden(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html>\n<head><title>403 Forbidden</title></head>\n<body>" + b"x" * 5000 + b"</body></html>\n"
            self.send_response(403)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forbidden)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = run("simulate", "--from-cluster", "--kubeconfig", loopback_kubeconfig(no_kube_env, server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 1, result.stderr
    line = one_line_error(result)
    assert line.startswith("error: 403") and "GET /" in line and "not a Kubernetes Status" in line, line
    assert len(line) < 400 and "x" * 300 not in line
