"""``dexrl export``: an RLinf training checkpoint as a Dexbotic checkpoint folder, or on the hub."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dexrl.console import console, print_json
from dexrl.errors import disk_full, disk_full_error
from dexrl.hub.home import check_repo_id

if TYPE_CHECKING:
    from dexrl.checkpoints.export import Exported
    from dexrl.checkpoints.sources import CheckpointSource

EPILOG = """\
Examples:

  dexrl export runs/spatial_pi0 --out exported/spatial_pi0
      The newest checkpoint of the run: config.json, model.safetensors (Dexbotic's key names),
      tokenizer, preprocessor_config.json, norm_stats.json, dexrl-export.json and a README.md
      model card. The PPO value head (and a flow_noise run's noise head) is dropped.

  dexrl export runs/spatial_pi0/checkpoints/global_step_100 --out exported/step100 \\
      --keep-value-head --push-to-hub me/pi0-libero-spatial-ppo
      Keeps the value head in value_head.safetensors and uploads the folder; the model card
      carries the newest `dexrl eval` table of that step (runs/spatial_pi0/eval/...).

  dexrl export runs/spatial_grpo_noise --out exported/grpo --keep-noise-head
      A flow_noise run: the Dexbotic folder as above, and its learned noise head beside it in
      noise_head.safetensors (to go on training with that exploration).

  dexrl export runs/spatial_pi0 --out exported/spatial_pi0 --json | jq -r '.files[]'
      The same export, its summary as one JSON document (schema dexrl.export/1).

The folder loads with `dexrl eval --ckpt`, `dexrl train --ckpt` and Dexbotic's own loader.
"""

SCHEMA = "dexrl.export/1"


def export_command(
    checkpoint: str = typer.Argument(..., help="RLinf run folder, global_step_N folder or its "
                                     "full_weights.pt."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write (empty or new)."),
    keep_value_head: bool = typer.Option(False, "--keep-value-head", help="Also write the "
                                         "value head (value_head.safetensors)."),
    keep_noise_head: bool = typer.Option(False, "--keep-noise-head", help="Also write "
                                         "flow_noise's noise head (noise_head.safetensors)."),
    base: str = typer.Option(None, "--base", help="Base checkpoint (default: the run's "
                             "actor.model.model_path)."),
    results: Path = typer.Option(None, "--results", help="results.json for the model card "
                                 "(default: the newest eval of this step in RUN_DIR/eval)."),
    repo_id: str = typer.Option(None, "--push-to-hub", help="Upload to this hub repo id."),
    private: bool = typer.Option(False, "--private", help="Create the hub repo as private."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier export."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (schema "
                                 f"{SCHEMA}) instead of text."),
) -> None:
    """Turn an RLinf training checkpoint into a Dexbotic-layout checkpoint folder."""
    from dexrl.checkpoints.export import check_export, export_checkpoint, push_to_hub
    from dexrl.checkpoints.sources import resolve_checkpoint
    from dexrl.evaluation.results import find_results, load_results

    # With --json the text goes nowhere: its facts are in the one document printed at the end.
    say = console(file=io.StringIO()) if as_json else console()
    if repo_id:
        check_repo_id(repo_id)  # before minutes of writing
    source = resolve_checkpoint(checkpoint, base)
    if source.form == "rlinf":
        say.print(f"Exporting step {source.step} of {source.run_dir or source.weights}; "
                      f"config, tokenizer and norm stats from {source.model_dir} "
                      f"(from {source.base_from})")
    for note in source.notes:
        say.print(note)
    check_export(source, out, overwrite)  # refused before any results.json is read
    card = results if results is not None else find_results(source.run_dir, source.step)
    try:
        done = export_checkpoint(source, out, keep_value_head=keep_value_head,
                                 keep_noise_head=keep_noise_head, overwrite=overwrite,
                                 results=(card, load_results(card)) if card is not None else None)
    except OSError as exc:
        if not disk_full(exc):
            raise
        # The export is built beside --out and published whole: a failed one leaves nothing.
        raise disk_full_error(out.expanduser().resolve(), facts=["nothing of this export was "
                              "kept"], hint="free space on that disk, or pass --out on a larger "
                              "one; then run the command again") from None
    head = "kept in value_head.safetensors" if done.value_head else "dropped"
    noise = "; noise head kept in noise_head.safetensors" if done.noise_head else ""
    say.print(f"Exported {done.tensors} tensors ({done.dtype}) to {done.out}; value head "
                  f"{head}{noise}.")
    if done.from_base:
        say.print(f"Copied {len(done.from_base)} unused entries from the base checkpoint "
                      "so the key set equals Dexbotic's.")
    say.print("Model card: " + (f"with the results of {done.results}" if done.results
                                    else "no results.json found (run `dexrl eval` first to "
                                         "include a table)"))
    url = push_to_hub(done.out, repo_id, private=private) if repo_id else None
    if url is not None:
        say.print(f"Uploaded to {url}")
    if as_json:
        print_json(SCHEMA, **export_record(source, done),
                   hub=None if url is None else {"repo_id": repo_id, "url": url,
                                                 "private": private})


def export_record(source: CheckpointSource, done: Exported) -> dict[str, Any]:
    """What the export's text says, as data: the step and where it came from, the folder and
    its files, the tensors and their dtype, the value head, the model card's results."""
    return {"out": done.out, "step": source.step, "source": source.describe(),
            "notes": list(source.notes),
            "files": sorted(str(p.relative_to(done.out)) for p in done.out.rglob("*")
                            if p.is_file()),
            "tensors": done.tensors, "dtype": done.dtype, "value_head": done.value_head,
            "noise_head": done.noise_head,
            "from_base": list(done.from_base), "model_card_results": done.results}


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("export", epilog=EPILOG)(export_command)
