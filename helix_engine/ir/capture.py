"""``helix ir capture``: keep every compiler stage of the operator's kernels (parent side).

- npu: upstream's capture (spec upstream-profile-ir §C): run the case once with
  ``TRITON_DEBUG=1 TRITON_ALWAYS_COMPILE=1``, read Triton-Ascend's ``Dumping intermediate
  results to <dir>`` and ``[DEBUG] cmd_list: <cmd>`` lines, archive the dump, then replay the
  bishengir-compile command with ``--mlir-print-ir-after-all --mlir-print-ir-tree-dir=
  D/bishengir_stages`` (stderr → ``D/all-ir.txt``).
- cuda: the case runs once as a job; every compiled kernel's Triton stages (ttir, ttgir, llir,
  ptx) and metadata (n_regs, n_spills, shared, num_warps, num_stages) are written from the JIT.
- cpu: Triton's interpreter compiles nothing, so helix records each launch's argument types in
  the interpreter run, then compiles the same kernels for sm_90 with Triton's own NVIDIA backend
  (it ships ptxas) in a second job: real ttir/ttgir/llir/ptx, labelled "compiled for sm_90
  without a GPU".
Layout for cuda/cpu: ``D/<kernel>/<kernel>.{source,ttir,ttgir,llir,ptx,cubin}`` + ``metadata.json``.
Every capture writes ``D/capture-manifest.json``. D must not exist yet (no overwrite).
The jobs write into a staging folder beside D (workspace/staging.py) that is renamed to D only
when the capture passed; a cancelled, timed-out or failed capture leaves no D (so it can simply
be run again) and no partial stages for list-stages to read.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.eval.jobrun import resolve_bench_inputs, round_name_of, run_child_job
from helix_engine.profile.bench import profile_timeout
from helix_engine.workspace import layout, staging
from helix_engine.workspace.files import atomic_write_json

DUMP_MARK = "Dumping intermediate results to "
CMD_MARK = "[DEBUG] cmd_list: "
REJOIN_FLAGS = ("--append-bisheng-options=", "--discrete-mask-access-conversion=", "--triton-to-unstructure=",
                "--triton-to-linalg=")
ADAPTER_INPUT = "kernel.ttadapter.mlir"
CPU_LABEL = "compiled for sm_{arch} without a GPU (Triton's NVIDIA backend, from the interpreter run's launch types)"
REPLAY_TIMEOUT_S = 600


def parse_debug_output(text: str) -> tuple[str, list[str]]:
    """(dump dir, compile command tokens) from the last marker lines; HelixError when absent."""
    dump = cmd = None
    for line in text.splitlines():
        if DUMP_MARK in line:
            dump = line.split(DUMP_MARK, 1)[1].strip()
        if CMD_MARK in line:
            cmd = line.split(CMD_MARK, 1)[1].strip()
    if dump is None or cmd is None:
        missing = " and ".join(m for m, v in (("'Dumping intermediate results to'", dump), ("'[DEBUG] cmd_list:'", cmd))
                               if v is None)
        raise HelixError(f"the TRITON_DEBUG run printed no {missing} line; the kernel may have come from the cache "
                         "or this Triton build does not print them. Check TRITON_ALWAYS_COMPILE=1 reached the run.")
    return dump, split_command(cmd)


def split_command(cmd: str) -> list[str]:
    """A printed Python list is parsed as one; plain text is split on spaces and values that
    contained spaces are re-joined onto their ``--flag=`` (upstream's rule for four flags)."""
    if cmd.startswith("["):
        try:
            value = ast.literal_eval(cmd)
            if isinstance(value, (list, tuple)):
                return [str(v) for v in value]
        except (ValueError, SyntaxError):
            pass
    out: list[str] = []
    joining: str | None = None
    for token in cmd.split():
        if joining is not None and _continues(joining, token):
            out[-1] = f"{out[-1]} {token}"
            continue
        joining = next((flag for flag in REJOIN_FLAGS if token.startswith(flag)), None)
        out.append(token)
    return out


def _continues(flag: str, token: str) -> bool:
    """Does ``token`` belong to the value of ``flag``? bisheng options are compiler flags
    (``-O2 -g``) so only a ``--flag``/``-o``/an input ends them; pass options are ``k=v`` words."""
    if token.endswith(".mlir"):
        return False
    if flag == "--append-bisheng-options=":
        return not token.startswith("--") and token != "-o"
    return not token.startswith("-")


def build_replay(tokens: list[str], archived_input: Path, stages_dir: Path) -> list[str]:
    """Swap the input for the archived copy, drop old print flags, print every pass to a tree."""
    out: list[str] = []
    swapped = False
    for token in tokens:
        if token.startswith(("--bishengir-print-ir-after", "--mlir-print-ir-tree-dir", "--mlir-print-ir-after-all")):
            continue
        if not swapped and token.endswith(ADAPTER_INPUT):
            out.append(str(archived_input))
            swapped = True
            continue
        out.append(token)
    if not swapped:
        raise HelixError(f"the compile command names no {ADAPTER_INPUT} input; cannot replay it.")
    return out + ["--mlir-print-ir-after-all", f"--mlir-print-ir-tree-dir={stages_dir}"]


def _check_new_dir(ir_dir: Path) -> Path:
    ir_dir = Path(ir_dir).resolve()
    if ir_dir.exists():
        raise HelixError(f"{ir_dir} already exists; captures never overwrite. Pick a new --ir-dir or remove it.")
    return ir_dir


def capture_ir(ir_dir: Path, operator_file: Path, bench_file: Path | None = None, case_id: str | None = None,
               backend: str | None = None, on_event: Any = None) -> dict[str, Any]:
    """Capture the stages into ``ir_dir``; returns the manifest plus return_code and message."""
    from helix_engine.eval.backends import select_backend

    final = _check_new_dir(ir_dir)
    operator_file, bench_file = resolve_bench_inputs(operator_file, bench_file)
    be = select_backend(backend)
    ws = layout.workspace_of(operator_file)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging.remove_leftovers(final.parent)
    staged = staging.staging_dir(final)
    try:
        outcome = _capture(ws, staged, operator_file, bench_file, case_id, be, on_event)
    except BaseException:
        staging.discard(staged)
        raise
    return _settle(outcome, staged, final)


def _settle(outcome: dict[str, Any], staged: Path, final: Path) -> dict[str, Any]:
    """Promote the staged capture to ``final`` when it passed; otherwise remove it."""
    if outcome.get("return_code") != 0:
        staging.discard(staged)
        outcome = _relocated(outcome, staged, final)
        note = f"no IR directory was kept ({final} was not created); fix the failure and capture again"
        return {**outcome, "ir_dir": None, "message": "\n".join(filter(None, [outcome.get("message"), note]))}
    manifest = staged / "capture-manifest.json"
    try:
        if manifest.is_file():  # the jobs only knew the staging folder: record the final paths
            atomic_write_json(manifest, _relocated(json.loads(manifest.read_text(encoding="utf-8")), staged, final))
        staging.promote(staged, final)
    except (OSError, ValueError) as exc:
        staging.discard(staged)
        return {**_relocated(outcome, staged, final), "ir_dir": None, "return_code": 1,
                "message": f"the capture ran but cannot be kept: {exc}"}
    return _relocated(outcome, staged, final)


def _relocated(value: Any, staged: Path, final: Path) -> Any:
    """``value`` with the staging folder's path replaced by the final one (manifest paths)."""
    if isinstance(value, str):
        return value.replace(str(staged), str(final))
    if isinstance(value, list):
        return [_relocated(v, staged, final) for v in value]
    if isinstance(value, dict):
        return {k: _relocated(v, staged, final) for k, v in value.items()}
    return value


def _capture(ws: Path, ir_dir: Path, operator_file: Path, bench_file: Path, case_id: str | None, be: Any,
             on_event: Any) -> dict[str, Any]:
    """Run the capture into ``ir_dir`` (the staging folder)."""
    common = {"operator_file": str(operator_file), "bench_file": str(bench_file), "case_id": case_id,
              "ir_dir": str(ir_dir)}
    job_kw = {"backend": be, "cwd": operator_file.parent, "round_name": round_name_of(operator_file),
              "timeout_s": profile_timeout(), "on_event": on_event}
    manifest: dict[str, Any] = {"bench_file": str(bench_file), "operator_file": str(operator_file),
                                "case_id": case_id, "backend": be.name, "remote": None, "created_at": time.time()}
    ir_dir.mkdir(parents=True)
    if be.name == "npu":
        return _capture_npu(ws, ir_dir, common, job_kw, manifest)
    if be.name == "cuda":
        done = run_child_job(ws, "ir-capture", "helix_engine.ir.worker", {**common, "mode": "cuda"}, **job_kw)
        manifest["label"] = "compiled by the CUDA JIT on this device"
        return _finish(ir_dir, manifest, done, [done.job.id])
    launches = ir_dir / "launches.json"
    first = run_child_job(ws, "ir-capture", "helix_engine.ir.worker",
                          {**common, "mode": "record", "launches_file": str(launches)}, **job_kw)
    if not first.result or first.result.get("return_code") != 0:
        return _finish(ir_dir, manifest, first, [first.job.id])
    if not first.result.get("launches"):
        manifest["label"] = "the interpreter run launched no Triton kernel: nothing to capture"
        return _finish(ir_dir, manifest, first, [first.job.id])
    second = run_child_job(ws, "ir-capture", "helix_engine.ir.worker",
                           {**common, "mode": "compile", "launches_file": str(launches)},
                           env={"TRITON_INTERPRET": "0"}, **job_kw)
    from helix_engine.ir.worker import nogpu_target

    manifest["label"] = CPU_LABEL.format(arch=nogpu_target()[1])
    return _finish(ir_dir, manifest, second, [first.job.id, second.job.id])


def _finish(ir_dir: Path, manifest: dict[str, Any], done: Any, job_ids: list[str]) -> dict[str, Any]:
    result = done.result or {}
    kernels = result.get("kernels", [])
    errors = [f"{k['name']}: {k['error']}" for k in kernels if k.get("error")]
    rc = int(result.get("return_code", 1)) if done.job.status in ("passed", "failed") else 1
    if rc == 0 and kernels and len(errors) == len(kernels):
        rc = 1
    message = result.get("error") or done.job.message if rc else None
    if errors:
        message = "; ".join(filter(None, [message, *errors]))
    if rc and not result:
        message = (message or f"the capture job ended with status {done.job.status}") + "\n" + done.output[-2000:]
    manifest.update({"kernels": kernels, "job_ids": job_ids, "return_code": rc, "message": message})
    try:
        import importlib.metadata as md

        manifest["triton_version"] = md.version("triton")
    except Exception:  # noqa: BLE001 - informative only
        manifest["triton_version"] = None
    atomic_write_json(ir_dir / "capture-manifest.json", manifest)
    return {**manifest, "ir_dir": str(ir_dir)}


def _capture_npu(ws: Path, ir_dir: Path, common: dict[str, Any], job_kw: dict[str, Any],
                 manifest: dict[str, Any]) -> dict[str, Any]:
    done = run_child_job(ws, "ir-capture", "helix_engine.ir.worker", {**common, "mode": "run-once"},
                         env={"TRITON_DEBUG": "1", "TRITON_ALWAYS_COMPILE": "1"}, output_tail_chars=4 << 20,
                         **job_kw)
    manifest["rendered_command"] = done.job.argv
    if done.job.status != "passed":
        return _finish(ir_dir, manifest, done, [done.job.id])
    dump, tokens = parse_debug_output(done.output)
    dump_dir = Path(dump)
    if not dump_dir.is_dir():
        raise HelixError(f"the dump folder {dump_dir} printed by TRITON_DEBUG does not exist any more.")
    archive = ir_dir / "triton_dump"
    shutil.copytree(dump_dir, archive)
    inputs = list(archive.rglob(ADAPTER_INPUT))
    if len(inputs) != 1:
        raise HelixError(f"{archive} holds {len(inputs)} {ADAPTER_INPUT} files, expected exactly one; "
                         "capture one kernel at a time (--case-id).")
    replay = build_replay(tokens, inputs[0], ir_dir / "bishengir_stages")
    with open(ir_dir / "all-ir.txt", "w", encoding="utf-8") as err:
        try:
            proc = subprocess.run(replay, stdout=subprocess.DEVNULL, stderr=err, timeout=REPLAY_TIMEOUT_S,
                                  cwd=ir_dir, check=False)
            rc = proc.returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            rc = 1
            err.write(f"\nhelix: replay failed: {exc}\n")
    manifest.update({"dumped_ir_dir": str(dump_dir), "original_compile_command": tokens,
                     "replay_compile_command": replay, "archived_input": str(inputs[0]),
                     "label": "Triton-Ascend TRITON_DEBUG compile-command replay"})
    done.result = {"return_code": rc, "kernels": [], "error": None if rc == 0 else
                   f"the replayed compile exited {rc}; see {ir_dir / 'all-ir.txt'}"}
    return _finish(ir_dir, manifest, done, [done.job.id])
