"""Cluster dispatch without a cluster (issue 15): what a job carries by content and brings
back, the --cluster flag on every command that runs a job, and the sentences for what cannot
run (no Ray, no address, --devices with --cluster, an NPU IR capture). The jobs themselves run
on a real local Ray head in tests/e2e/test_cluster_jobs.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helix_engine import cluster
from helix_engine.cli import main
from helix_engine.cluster.payload import (
    Parcel,
    collect,
    deliver,
    materialize,
    pack,
    relocate,
)
from helix_engine.errors import HelixError

JOB_COMMANDS = [["run-test"], ["run-test-optimize"], ["run-bench"], ["probe-bench"], ["profile-bench"],
                ["ir", "capture"]]


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(cluster.CLUSTER_ENV, raising=False)
    monkeypatch.delenv(cluster.RESOURCE_ENV, raising=False)
    yield
    cluster.use_cluster(None)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "opt-round-1").mkdir(parents=True)
    (ws / "baseline").mkdir()
    (ws / "softmax.py").write_text("def softmax(x):\n    return x\n")
    (ws / "bench_softmax.py").write_text("from helper import CASES\n")
    (ws / "helper.py").write_text("CASES = []\n")  # imported by the harness: its folder is on sys.path
    (ws / "notes.txt").write_text("not python: not carried\n")
    (ws / "opt-round-1" / "opt_softmax.py").write_text("def softmax(x):\n    return x * 1\n")
    (ws / "baseline" / "softmax.py").write_text("def softmax(x):\n    return x + 0\n")
    return ws


def test_a_job_carries_its_files_by_content_and_brings_its_outputs_back(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "softmax_result.pt").write_bytes(b"\x00\x01archive")
    request = {"action": "test", "operator_file": str(ws / "opt-round-1" / "opt_softmax.py"),
               "test_file": str(ws / "bench_softmax.py"), "ref_operator_file": str(ws / "baseline" / "softmax.py"),
               "ref_archive": str(outside / "softmax_result.pt"),
               "archive_path": str(ws / "opt-round-1" / "opt_softmax_result.pt"),
               "ir_dir": str(ws / "opt-round-1" / ".ir.staging"), "test_mode": "differential"}
    parcel = pack(request, ws, ws)
    assert set(parcel.files) == {"ws/opt-round-1/opt_softmax.py", "ws/bench_softmax.py", "ws/helper.py",
                                 "ws/softmax.py", "ws/baseline/softmax.py", "ext/0/softmax_result.pt"}
    node = parcel.to_node()
    assert node.local == {} and str(tmp_path) not in json.dumps({k: v for k, v in node.paths.items()})

    root = tmp_path / "node" / "files"
    moved, cwd = materialize(node, request, root)
    assert cwd == root / "ws"
    assert Path(moved["operator_file"]).read_text() == "def softmax(x):\n    return x * 1\n"
    assert Path(moved["ref_archive"]).read_bytes() == b"\x00\x01archive"
    assert (root / "ws" / "helper.py").is_file() and not (root / "ws" / "notes.txt").exists()
    assert moved["test_mode"] == "differential" and str(ws) not in json.dumps(moved)

    Path(moved["archive_path"]).write_bytes(b"new archive")  # what the worker writes on the node
    (Path(moved["ir_dir"]) / "add_kernel").mkdir()
    (Path(moved["ir_dir"]) / "add_kernel" / "add_kernel.ttir").write_text("module {}\n")
    outputs = collect(node, root)
    written = deliver(parcel, outputs)
    assert (ws / "opt-round-1" / "opt_softmax_result.pt").read_bytes() == b"new archive"
    assert (ws / "opt-round-1" / ".ir.staging" / "add_kernel" / "add_kernel.ttir").read_text() == "module {}\n"
    assert len(written) == 2

    result = json.dumps({"archived_result": moved["archive_path"]})
    assert json.loads(relocate(result, parcel, str(root)))["archived_result"] == request["archive_path"]


def test_a_linked_operator_is_not_sent(tmp_path: Path) -> None:
    """The safe reader decides what leaves the machine: a final symlink (to a secret) is refused."""
    ws = _workspace(tmp_path)
    secret = tmp_path / "secret.py"
    secret.write_text("TOKEN = 'x'\n")
    (ws / "opt-round-1" / "opt_softmax.py").unlink()
    (ws / "opt-round-1" / "opt_softmax.py").symlink_to(secret)
    with pytest.raises(HelixError, match="cannot send .*opt_softmax.py to the cluster"):
        pack({"operator_file": str(ws / "opt-round-1" / "opt_softmax.py")}, ws, ws)


def test_the_node_refuses_names_that_leave_its_folder(tmp_path: Path) -> None:
    for bad in ("../../etc/passwd", "/etc/passwd", "ws/../../x"):
        with pytest.raises(HelixError, match="not a relative name"):
            materialize(Parcel(files={bad: b"x"}), {}, tmp_path / "root")
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize("argv", JOB_COMMANDS, ids=" ".join)
def test_every_job_command_takes_cluster(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--cluster is parsed by every command that runs a job and names where its jobs go (the
    operator file does not exist, so nothing connects)."""
    extra = ["--case-id", "c"] if argv == ["profile-bench"] else (["--ir-dir", str(tmp_path / "ir")]
                                                                 if argv[0] == "ir" else [])
    code = main([*argv, "--operator-file", str(tmp_path / "missing.py"), *extra, "--cluster", "head:6379"])
    assert code == 1
    err = capsys.readouterr().err
    assert "missing.py" in err and "Ray" not in err and "cluster" not in err
    assert cluster.cluster_address() == "head:6379"


def test_cluster_status_without_an_address_says_how_to_give_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "status"]) == 1
    assert "error: which cluster? pass --cluster HEAD:6379 or set HELIX_CLUSTER" in capsys.readouterr().err


def test_without_ray_the_sentence_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(["cluster", "status", "--cluster", "head:6379"]) == 1
    err = capsys.readouterr().err
    assert "--cluster needs Ray, which is not installed here" in err and "'.[cluster]'" in err


def test_devices_and_an_npu_ir_capture_are_refused_before_connecting(tmp_path: Path) -> None:
    from helix_engine.cluster.dispatch import run_cluster_job
    from helix_engine.eval.backends import get_backend

    cluster.use_cluster("head:6379")
    common = {"argv": ["python"], "cwd": tmp_path}
    with pytest.raises(HelixError, match="with --cluster, Ray picks a free device on the cluster: drop --devices"):
        run_cluster_job(tmp_path, "run-bench", "helix_engine.eval.worker", {}, backend=get_backend("cpu"),
                        device_pool=["0", "1"], **common)
    with pytest.raises(HelixError, match="run `helix ir capture` on the NPU server itself"):
        run_cluster_job(tmp_path, "ir-capture", "helix_engine.ir.worker", {"mode": "run-once"},
                        backend=get_backend("npu"), **common)
    assert not (tmp_path / ".helix").exists()  # refused: no job folder


def test_device_resource_per_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [cluster.device_resource(b) for b in ("npu", "cuda", "cpu")] == ["NPU", "GPU", "CPU"]
    monkeypatch.setenv(cluster.RESOURCE_ENV, "NPU")
    assert cluster.device_resource("cpu") == "NPU"
    monkeypatch.setenv(cluster.CLUSTER_ENV, "h:1")
    assert cluster.cluster_address() == "h:1"
    cluster.use_cluster("other:2")
    assert cluster.cluster_address() == "other:2"  # the flag beats the environment


@pytest.mark.parametrize(("reported", "recorded"), [("passed", "passed"), ("timeout", "timeout"),
                                                    ("exploded", "failed"), (None, "failed"), (3, "failed")])
def test_a_node_status_that_is_no_job_status_is_recorded_as_failed(reported: object, recorded: str,
                                                                   tmp_path: Path) -> None:
    """The node's final record comes from another process: a status job.json cannot hold was
    written verbatim before, and the job record could no longer be read."""
    import time

    from helix_engine.cluster.dispatch import _ClusterSupervisor, _conclude
    from helix_engine.jobs.registry import JobInfo, read_job_file

    folder = tmp_path / "job-1"
    folder.mkdir()
    sup = _ClusterSupervisor(folder, JobInfo(id="job-1", kind="run-bench", created_at=time.time(), status="running"),
                             None)
    final = {"job": {"status": reported, "message": "done on the node", "exit_code": 0}}
    info = _conclude(sup, final, None, {}, lambda *_: None, lambda *_: "")
    assert info.status == recorded
    assert read_job_file(folder).status == recorded  # job.json stays readable
