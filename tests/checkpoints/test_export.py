"""dexrl export: Dexbotic layout, key for key; round trip to eval; model card; hub upload."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers.modes import UMASKS, expected, modes, umask
from safetensors import safe_open
from safetensors.torch import load_file

from dexrl.checkpoints.export import export_checkpoint, push_to_hub
from dexrl.checkpoints.files.steps import mark_complete
from dexrl.checkpoints.policy import load_eval_policy, load_policy
from dexrl.checkpoints.sources import resolve_checkpoint
from dexrl.errors import DexrlError
from dexrl.evaluation.episode_loop import EpisodeResult
from dexrl.evaluation.results import build_results, find_results, load_results
from dexrl.runs.durable import write_json
from dexrl.runs.layout import WEIGHTS_IN_STEP


@pytest.fixture(scope="module")
def extras_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose base checkpoint carries the unused tensors real Dexbotic files hold."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    from dexrl.models.pi0.tiny import write_tiny_pi0

    root = tmp_path_factory.mktemp("extras")
    base = write_tiny_pi0(root / "base", seed=3, extra_keys=True)
    return write_tiny_rlinf_run(root / "run", base, step=7, seed=5)


def keys(path: Path) -> dict[str, tuple[int, ...]]:
    with safe_open(str(path), framework="pt") as handle:
        return {k: tuple(handle.get_slice(k).get_shape()) for k in handle.keys()}  # noqa: SIM118


def test_export_is_a_dexbotic_checkpoint(extras_run: Path, tmp_path: Path,
                                         actions: Callable) -> None:
    source = resolve_checkpoint(extras_run)
    done = export_checkpoint(source, tmp_path / "out")
    out = done.out
    base = source.model_dir
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["README.md", "config.json", "dexrl-export.json", "model.safetensors",
         "norm_stats.json", "preprocessor_config.json", "special_tokens_map.json",
         "tokenizer.model", "tokenizer_config.json"])
    for name in ("config.json", "norm_stats.json", "preprocessor_config.json", "tokenizer.model",
                 "tokenizer_config.json"):
        assert (out / name).read_bytes() == (base / name).read_bytes(), name
    assert keys(out / "model.safetensors") == keys(base / "model.safetensors")
    assert done.from_base and all("embed_tokens" in k or ".head." in k for k in done.from_base)
    assert not any(k.startswith("value_head") for k in keys(out / "model.safetensors"))
    # the loader accepts it, and it acts exactly like the training checkpoint
    assert torch.equal(actions(load_policy(out)), actions(load_eval_policy(source, "cpu")))


def test_export_manifest_gives_eval_the_training_settings(extras_run: Path,
                                                          tmp_path: Path) -> None:
    out = export_checkpoint(resolve_checkpoint(extras_run), tmp_path / "out").out
    exported = resolve_checkpoint(out)
    assert exported.form == "dexbotic"
    training = exported.training
    assert (training.suite, training.num_action_chunks, training.num_steps) == (
        "libero_spatial", 5, 4)
    manifest = json.loads((out / "dexrl-export.json").read_text())
    assert manifest["source"]["step"] == 7 and manifest["source"]["run_dir"] == str(extras_run)
    assert manifest["weights"]["value_head"] is None


def test_value_head_kept_beside_the_model(tiny_run: Path, tmp_path: Path) -> None:
    source = resolve_checkpoint(tiny_run)
    done = export_checkpoint(source, tmp_path / "out", keep_value_head=True)
    head = load_file(done.out / "value_head.safetensors")
    saved = torch.load(source.weights, weights_only=True)
    assert set(head) == {"value_head.weight", "value_head.bias"}
    assert all(torch.equal(head[k], saved[k]) for k in head)
    assert "value_head.weight" not in keys(done.out / "model.safetensors")
    load_policy(done.out)  # the extra file does not disturb the loader


def test_float32_training_of_a_bf16_base_keeps_float32(tmp_path: Path) -> None:
    from helpers.rlinf_run import write_tiny_rlinf_run

    from dexrl.models.pi0.tiny import write_tiny_pi0

    base = write_tiny_pi0(tmp_path / "base", dtype=torch.bfloat16)
    run = write_tiny_rlinf_run(tmp_path / "run", base)
    weights = run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP
    torch.save({k: v.float() for k, v in torch.load(weights, weights_only=True).items()},
               weights)
    mark_complete(weights.parents[2], 2)  # saved so: the marker records the float32 file
    done = export_checkpoint(resolve_checkpoint(run), tmp_path / "out")
    assert done.dtype == "float32"
    assert json.loads((done.out / "config.json").read_text())["torch_dtype"] == "float32"
    assert json.loads((base / "config.json").read_text())["torch_dtype"] == "bfloat16"
    policy = load_policy(done.out)
    assert policy.network.model.action_out_proj.weight.dtype == torch.float32


def test_out_folder_guard(tiny_run: Path, tmp_path: Path) -> None:
    source = resolve_checkpoint(tiny_run)
    out = tmp_path / "out"
    export_checkpoint(source, out)
    with pytest.raises(DexrlError) as err:
        export_checkpoint(source, out)
    assert err.value.code == "export-out-not-empty"
    assert "--overwrite" in err.value.hint
    export_checkpoint(source, out, overwrite=True, keep_value_head=True)
    assert (out / "value_head.safetensors").is_file()
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(DexrlError) as err:
        export_checkpoint(source, foreign, overwrite=True)
    assert err.value.code == "export-out-foreign-files"
    assert (foreign / "thesis.tex").read_text() == "precious"


@pytest.mark.parametrize("mask", UMASKS)
def test_export_files_get_the_umask_modes(tiny_run: Path, tmp_path: Path, mask: int) -> None:
    """safetensors creates model.safetensors 0600: published, it is 0644 under umask 022."""
    with umask(mask):
        done = export_checkpoint(resolve_checkpoint(tiny_run), tmp_path / "out",
                                 keep_value_head=True)
    assert (done.out / "model.safetensors").is_file()
    assert (done.out / "value_head.safetensors").is_file()
    assert modes(done.out) == expected(done.out, mask)


def test_failed_export_writes_nothing(tiny_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    weights = run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP
    state = torch.load(weights, weights_only=True)
    state["model.llm.layers.0.mlp.up_proj.weight"] = torch.zeros(3, 3)
    torch.save(state, weights)
    mark_complete(weights.parents[2], 2)  # saved so: the marker records the odd file
    with pytest.raises(DexrlError) as err:
        export_checkpoint(resolve_checkpoint(run), tmp_path / "out")
    assert err.value.code == "base-weights-mismatch"
    assert any("up_proj" in d for d in err.value.details)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_dexbotic_checkpoint_is_refused(tiny_pi0_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DexrlError) as err:
        export_checkpoint(resolve_checkpoint(tiny_pi0_dir), tmp_path / "out")
    assert err.value.code == "export-already-dexbotic"


def results_for(source_path: str, step: int, run_dir: Path, rate_ok: int) -> dict:
    episodes = [EpisodeResult(0, k, k, k, k < rate_ok, 50, "h", 0) for k in range(4)]
    return build_results(suite="libero_spatial", checkpoint={"path": source_path, "step": step,
                                                             "run_dir": str(run_dir)},
                         config={"max_episode_steps": 220, "action_chunk": 5, "num_steps": 4},
                         seed=0, episodes=episodes, languages={0: "pick | place"},
                         wall_time_s=1.0, environment={})


def test_model_card_carries_the_newest_results_of_that_step(tiny_run: Path,
                                                            tmp_path: Path) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    evals = run / "eval"
    for name, step, ok in (("a", 2, 3), ("b", 9, 1)):
        (evals / name).mkdir(parents=True)
        write_json(evals / name / "results.json", results_for(str(run), step, run, ok))
    source = resolve_checkpoint(run)
    newest = find_results(source.run_dir, source.step)  # what `dexrl export` puts on the card
    done = export_checkpoint(source, tmp_path / "out", results=(newest, load_results(newest)))
    card = (done.out / "README.md").read_text()
    assert done.results == evals / "a" / "results.json"
    assert "| 0 | pick \\| place | 3/4 | 75.0 %" in card
    assert "| **all** |  | 3/4 |" in card
    explicit = tmp_path / "other.json"
    write_json(explicit, results_for("x", 1, tmp_path, 1))
    done = export_checkpoint(resolve_checkpoint(run), tmp_path / "out2",
                             results=(explicit, load_results(explicit)))
    assert "1/4" in (done.out / "README.md").read_text()


def test_model_card_prefers_an_evaluation_without_env_overrides(tmp_path: Path) -> None:
    """A masked evaluation (env overrides) made after the plain one is not the step's score."""
    evals = tmp_path / "eval"
    for name, overrides, created in (("plain", [], "2026-01-01"),
                                     ("masked", ["reach_cued.show_cue=false"], "2026-01-02")):
        data = results_for("x", 2, tmp_path, 1)
        data["config"]["env_overrides"], data["created"] = overrides, created
        (evals / name).mkdir(parents=True)
        write_json(evals / name / "results.json", data)
    assert find_results(tmp_path, 2) == evals / "plain" / "results.json"
    shutil.rmtree(evals / "plain")
    assert find_results(tmp_path, 2) == evals / "masked" / "results.json"


def test_model_card_prefers_a_complete_evaluation(tmp_path: Path) -> None:
    """An evaluation an env failure stopped (marked partial) made after the complete one is not
    the step's score; an older results.json without the mark counts as complete."""
    evals = tmp_path / "eval"
    for name, complete, created in (("old", None, "2026-01-01"), ("cut", False, "2026-01-02")):
        data = results_for("x", 2, tmp_path, 1)
        data["created"] = created
        data.pop("complete", None)
        if complete is not None:
            data["complete"] = complete
        (evals / name).mkdir(parents=True)
        write_json(evals / name / "results.json", data)
    assert find_results(tmp_path, 2) == evals / "old" / "results.json"


class LocalHub:
    """Stands in for huggingface_hub.HfApi: 'uploads' into a local folder."""

    def __init__(self, root: Path) -> None:
        self.root, self.calls = root, []

    def create_repo(self, repo_id: str, **kwargs: object) -> None:
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, *, folder_path: str, repo_id: str, **kwargs: object) -> None:
        self.calls.append(("upload_folder", repo_id, kwargs))
        shutil.copytree(folder_path, self.root / repo_id, dirs_exist_ok=True)


def test_push_to_hub_uploads_the_folder(tiny_run: Path, tmp_path: Path) -> None:
    done = export_checkpoint(resolve_checkpoint(tiny_run), tmp_path / "out")
    hub = LocalHub(tmp_path / "hub")
    url = push_to_hub(done.out, "me/pi0-ppo", private=True, api=hub)
    assert url.endswith("/me/pi0-ppo")
    assert hub.calls[0] == ("create_repo", "me/pi0-ppo", {"repo_type": "model", "private": True,
                                                          "exist_ok": True})
    uploaded = tmp_path / "hub" / "me" / "pi0-ppo"
    assert sorted(p.name for p in uploaded.iterdir()) == sorted(p.name for p in
                                                                done.out.iterdir())
    load_policy(uploaded)


def test_push_to_hub_errors_are_dexrl_errors(tmp_path: Path) -> None:
    import requests
    from huggingface_hub.errors import HfHubHTTPError

    class Refusing(LocalHub):
        def create_repo(self, repo_id: str, **kwargs: object) -> None:
            response = requests.Response()
            response.status_code = 401
            raise HfHubHTTPError("401 Client Error", response=response)

    with pytest.raises(DexrlError) as err:
        push_to_hub(tmp_path, "me/x", api=Refusing(tmp_path))
    assert err.value.code == "hub-auth-refused"
    with pytest.raises(DexrlError) as err:
        push_to_hub(tmp_path, "not a repo", api=LocalHub(tmp_path))
    assert err.value.code == "hub-repo-id-invalid"


@pytest.fixture(scope="module")
def noise_run(tiny_pi0_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flow_noise run: its weights carry the noise head beside the value head."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    from dexrl.bridge.policies.flow import build_noise_head

    run = write_tiny_rlinf_run(tmp_path_factory.mktemp("noise") / "run", tiny_pi0_dir,
                               overrides=("+noise=flow_noise",))
    weights = run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP
    state = torch.load(weights, weights_only=True)
    config = load_policy(tiny_pi0_dir).network.config
    head = build_noise_head(config.expert.hidden_size, config.action_dim, (0.08, 0.16),
                            torch.zeros(1))
    state.update({f"noise_head.{k}": v for k, v in head.state_dict().items()})
    torch.save(state, weights)
    mark_complete(weights.parents[2], 2)  # saved so: the marker records the head
    return run


def test_the_noise_head_is_dropped_or_kept_beside_and_dexbotic_still_loads(
        noise_run: Path, tmp_path: Path, actions: Callable) -> None:
    source = resolve_checkpoint(noise_run)
    dropped = export_checkpoint(source, tmp_path / "dropped")
    assert not dropped.noise_head and not (dropped.out / "noise_head.safetensors").exists()
    assert keys(dropped.out / "model.safetensors") == keys(source.model_dir /
                                                            "model.safetensors")
    kept = export_checkpoint(source, tmp_path / "kept", keep_noise_head=True)
    head = load_file(kept.out / "noise_head.safetensors")
    saved = torch.load(source.weights, weights_only=True)
    assert set(head) == {k for k in saved if k.startswith("noise_head.")} and head
    assert all(torch.equal(head[k], saved[k]) for k in head)
    manifest = json.loads((kept.out / "dexrl-export.json").read_text())
    assert manifest["weights"]["noise_head"] == "noise_head.safetensors"
    assert "noise head kept in noise_head.safetensors" in (kept.out / "README.md").read_text()
    # the Dexbotic loader takes both folders; eval of the run ignores the head
    want = actions(load_eval_policy(source, "cpu"))
    assert torch.equal(actions(load_policy(dropped.out)), want)
    assert torch.equal(actions(load_policy(kept.out)), want)
