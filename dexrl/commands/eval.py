"""``dexrl eval``: LIBERO success rates you can trust, with intervals, seeds and videos."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dexrl.bridge.launch.output import Output
from dexrl.console import console, print_json
from dexrl.errors import DexrlError, disk_full, disk_full_error, disk_full_folder
from dexrl.evaluation.request import EvalRequest
from dexrl.runs import durable

if TYPE_CHECKING:
    from rich.console import Console

EPILOG = """\
Examples:

  dexrl eval --ckpt Dexmal/libero-db-pi0 --suite libero_spatial
      The published protocol (--protocol standard, the default for a Dexbotic checkpoint): all
      10 tasks x 50 fixed initial states, 10 settle steps, seed 7 per task, 5 actions per call
      for π0. Prints a table per task (k/n, rate with a Wilson 95 % interval, mean length), the
      suite total beside the published numbers of that protocol, and writes
      eval/libero-db-pi0-libero_spatial-<time>/results.json.

  dexrl eval --ckpt runs/spatial_pi0/checkpoints/global_step_100 --suite libero_spatial \\
      --tasks 0,3-5 --episodes-per-task 10 --video failures
      An RLinf checkpoint: config, tokenizer and norm stats come from the run's base checkpoint;
      chunk and denoising steps from its training config. Results go to
      runs/spatial_pi0/eval/global_step_100-libero_spatial/ (videos/index.html for the videos).

  dexrl eval --ckpt exported/ --suite libero_spatial --compare eval/sft/results.json
      Adds per-task deltas and an exact McNemar test on the shared (task, trial) episodes
      (refused when the two ran different protocols, unless --allow-protocol-mismatch).

  dexrl eval --ckpt exported/ --suite libero_goal init_params.camera_heights=224 \\
      init_params.camera_widths=224
      key=value overrides of the LIBERO env config (env/<suite>.yaml).

  dexrl eval --ckpt runs/reach_cued_pi0_<time> --suite reach_cued --episodes-per-task 100 \\
      reach_cued.show_cue=false
      dexrl's cued reach task (one row per target), here with the target left out of the image:
      the success rate beside the blind bound shows whether the policy still reads its
      instruction (docs/learning.md).

  dexrl eval --ckpt Dexmal/libero-db-pi0 --suite libero_spatial --torch-compile default \\
      --cuda-graph
      The same protocol with the policy calls compiled and replayed as CUDA graphs (a GPU; the
      rollout's fast paths, compiled and captured before the first episode).

  dexrl eval --ckpt runs/reach_cued_pi0_<time> --suite reach_cued --json | jq .results.overall
      The same evaluation, its outcome as one JSON document (schema dexrl.eval/1): the output
      folder and results.json's content.

Two runs with the same arguments play the same episodes: fixed initial states per (task, trial),
seeds recorded, deterministic policy sampling (ODE from seeded noise).
"""

SCHEMA = "dexrl.eval/1"


def eval_command(
    ckpt: str = typer.Option(..., "--ckpt", help="Dexbotic checkpoint folder (or a repo id "
                             "fetched by `dexrl download`), RLinf run folder, global_step_N "
                             "folder or its full_weights.pt."),
    suite: str = typer.Option(..., "--suite", "-s", help="LIBERO suite (e.g. libero_spatial) "
                              "or built-in task (reach, reach_cued)."),
    tasks: str = typer.Option(None, "--tasks", help="Task ids, e.g. 0,3-5 (default: all)."),
    episodes_per_task: int = typer.Option(50, "--episodes-per-task", help="Trials per task: "
                                          "initial states 0..n-1."),
    num_envs: int = typer.Option(None, "--num-envs", help="Parallel envs (default: CPU cores)."),
    seed: int = typer.Option(0, "--seed", help="Seeds the envs and the policy noise."),
    num_steps: int = typer.Option(None, "--num-steps", help="Denoising steps (default: the "
                                  "training config, else the model's)."),
    action_chunk: int = typer.Option(None, "--action-chunk", help="Actions executed per policy "
                                     "call (default: the training config, else the model's)."),
    max_episode_steps: int = typer.Option(None, "--max-episode-steps", help="Horizon (default "
                                          "per suite: 220/280/300/520/400)."),
    video: str = typer.Option("none", "--video", help="none, failures or all."),
    out: str = typer.Option(None, "--out", "-o", help="Output folder."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier evaluation "
                                   "in --out."),
    compare: str = typer.Option(None, "--compare", help="Another run's results.json to pair "
                                "with."),
    base: str = typer.Option(None, "--base", help="Base checkpoint of RLinf weights (default: "
                             "the run's actor.model.model_path)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    dtype: str = typer.Option(None, "--dtype", help="float32 or bfloat16 (default: the "
                              "checkpoint's)."),
    allow_suite_mismatch: bool = typer.Option(False, "--allow-suite-mismatch", help="Evaluate "
                                              "on another suite than the one trained on."),
    protocol: str = typer.Option(None, "--protocol", help="standard (the published LIBERO "
                                 "protocol; default for a Dexbotic checkpoint) or training (the "
                                 "run's own settings; default for RLinf weights and dexrl "
                                 "tasks)."),
    allow_protocol_mismatch: bool = typer.Option(False, "--allow-protocol-mismatch",
                                                 help="Pair with --compare results of another "
                                                 "protocol."),
    torch_compile: str = typer.Option(None, "--torch-compile", help="Compile the policy call "
                                      "with this torch.compile mode (default, "
                                      "max-autotune-no-cudagraphs, ...); off by default."),
    cuda_graph: bool = typer.Option(False, "--cuda-graph", help="Replay the policy call as "
                                    "CUDA graphs (GPU only); off by default."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show third-party output "
                                 "(robosuite, gym, warnings) instead of logging it to "
                                 "OUT/eval.log."),
    overrides: list[str] = typer.Argument(None, help="Env config overrides, key=value."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (schema "
                                 f"{SCHEMA}) instead of text; the progress bar stays on stderr."),
) -> None:
    """Evaluate a checkpoint on LIBERO (RLinf's env wrapper) or on a dexrl task."""
    from dexrl.evaluation import report, session

    request = EvalRequest(
        ckpt=ckpt, suite=suite, tasks=tasks, episodes_per_task=episodes_per_task,
        num_envs=num_envs, seed=seed, num_steps=num_steps, action_chunk=action_chunk,
        max_episode_steps=max_episode_steps, video=video, out=out, overwrite=overwrite,
        compare=compare, base=base, device=device, dtype=dtype,
        allow_suite_mismatch=allow_suite_mismatch, verbose=verbose, protocol=protocol,
        allow_protocol_mismatch=allow_protocol_mismatch, torch_compile=torch_compile,
        cuda_graph=cuda_graph, env_overrides=tuple(overrides or ()))
    log = _temporary_log()
    claimed: list[Path] = []  # the output folder, once the evaluation has started writing it
    out_dir: list[Path] = []  # the output folder, once known
    # With --json the text goes nowhere (its facts are in the document printed at the end), and
    # what --verbose shows of third-party output goes to stderr.
    to_stderr = (contextlib.redirect_stdout(sys.stderr) if as_json and request.verbose
                 else contextlib.nullcontext())
    try:
        # Third-party output (robosuite, gym, warnings, the env subprocesses) goes to the log.
        with to_stderr, Output(log, request.verbose) as output:
            out_console = console(file=io.StringIO() if as_json else output.stream())
            prepared = session.prepare(request)
            out_dir.append(prepared.out)
            _describe_source(prepared.source, out_console)
            out_console.print(report.protocol_line(prepared.protocol))
            out_console.print(report.settings_table(prepared.settings.record()))
            results = _run(prepared, session, console(stderr=True, file=output.stream(err=True)),
                           on_claimed=lambda: claimed.append(prepared.out))
            _show_results(results, prepared.out, out_console)
    except OSError as exc:
        if not disk_full(exc):
            raise
        raise _disk_full(exc, out_dir[0] if out_dir else None) from None
    finally:
        kept = _keep_log(log, claimed[0] if claimed and not request.verbose else None)
    if as_json:
        print_json(SCHEMA, **eval_record(prepared, results, kept))
    elif kept is not None:
        console().print(f"Third-party output (robosuite, gym, warnings): {kept}")


def eval_record(prepared, results: dict, log: Path | None) -> dict:  # noqa: ANN001 - Prepared
    """The ``--json`` document's fields: where the evaluation wrote (folder, results.json, the
    videos, the third-party log), the checkpoint's notes, and results.json's content as written
    (per-task table, overall rate and 95 % interval, blind bound, reference, comparison)."""
    results_path, videos = _written(results, prepared.out)
    return {"out": prepared.out, "results_path": results_path, "videos": videos, "log": log,
            "notes": list(prepared.source.notes), "results": results}


def _written(results: dict, out_dir: Path) -> tuple[Path, Path | None]:
    """results.json and the videos folder (None without videos) of an evaluation."""
    from dexrl.evaluation.results import RESULTS_FILE
    from dexrl.evaluation.videos import VIDEO_DIR

    return (out_dir / RESULTS_FILE,
            out_dir / VIDEO_DIR if results["config"]["video"] != "none" else None)


def _disk_full(exc: OSError, out_dir: Path | None) -> DexrlError:
    """The ``disk-full`` error of an evaluation: the folder it could not write (the output
    folder unless the failed write named another), and what of the evaluation it holds."""
    from dexrl.evaluation.results import OWNED, PROGRESS_FILE

    folder = disk_full_folder(exc, out_dir if out_dir is not None else Path.cwd())
    written = [name for name in OWNED if out_dir is not None and (out_dir / name).exists()]
    facts = [f"the episodes finished so far are in {out_dir / PROGRESS_FILE}"
             ] if out_dir is not None and PROGRESS_FILE in written else []
    again = " with --overwrite" if written else ""
    return disk_full_error(folder, facts=facts, hint=f"free space on that disk and run the "
                           f"evaluation again{again}, or pass --out on a larger disk")


def _temporary_log() -> Path:
    """A log file outside the output folder, which must stay untouched until the run starts."""

    fd, name = tempfile.mkstemp(prefix="dexrl-eval-", suffix=".log")
    os.close(fd)
    durable.as_new(Path(name))  # mkstemp's 0600: the log moves into the output folder
    return Path(name)


def _keep_log(log: Path, out_dir: Path | None) -> Path | None:
    """Move the log into the output folder once the evaluation started writing it; else drop it
    (an input error, shown on the terminal, leaves nothing behind)."""
    from dexrl.evaluation.results import LOG_FILE

    if out_dir is not None and out_dir.is_dir():
        try:
            return Path(shutil.move(log, out_dir / LOG_FILE))
        except OSError:  # a full disk: no half-copied log there; it stays where it was
            (out_dir / LOG_FILE).unlink(missing_ok=True)
            return log if log.is_file() else None
    log.unlink(missing_ok=True)
    return None


def _run(prepared, session, err: Console,  # noqa: ANN001 - Prepared, the session module
         on_claimed: Callable[[], None]) -> dict:
    """Run the episodes under a progress bar on ``err``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  console=err, transient=False) as bar:
        job = bar.add_task("loading policy and envs", total=len(prepared.episodes))
        wins = [0]

        def started(total: int) -> None:
            on_claimed()
            bar.update(job, description="episodes (0 successes)")

        def finished(result) -> None:  # noqa: ANN001 - an EpisodeResult
            wins[0] += result.success
            bar.update(job, advance=1, description=f"episodes ({wins[0]} successes)")

        return session.run(prepared, command=sys.argv, on_start=started, on_episode=finished)


def _show_results(results: dict, out_dir: Path, out_console: Console) -> None:
    from dexrl.evaluation import report

    out_console.print(report.results_table(results))
    if results.get("blind_bound"):
        out_console.print(report.blind_bound_line(results))
    for table in (report.reference_table(results),
                  results.get("comparison") and report.comparison_table(results["comparison"])):
        if table is not None:
            out_console.print(table)
    results_path, videos = _written(results, out_dir)
    out_console.print(f"Results: {results_path}")
    if videos is not None:
        out_console.print(f"Videos: {videos}")


def _describe_source(source, console: Console) -> None:  # noqa: ANN001 - a CheckpointSource
    """Say what is evaluated, and where config, tokenizer and norm stats come from."""
    if source.form == "rlinf":
        console.print(f"Checkpoint: RLinf weights {source.weights} (step {source.step})")
        console.print(f"Config, tokenizer, image preprocessing, norm stats: base checkpoint "
                      f"{source.model_dir} (from {source.base_from})")
    else:
        console.print(f"Checkpoint: {source.model_dir} ({source.model_type})")
    if source.training:
        console.print(f"Training config: {source.training.source}")
    for note in source.notes:
        console.print(note)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("eval", epilog=EPILOG)(eval_command)
