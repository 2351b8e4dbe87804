"""`dexrl download` through the real CLI, against a stand-in hub on 127.0.0.1 (no network)."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from helpers import cli
from helpers.hub_server import FakeRepo, HubServer, commit_sha, use_hub
from huggingface_hub import constants

from dexrl.errors import DexrlError
from dexrl.hub import libero_assets
from dexrl.hub.client import hub_errors
from dexrl.hub.home import checkpoint_dir
from dexrl.hub.manifest import MANIFEST_NAME, Manifest, read_download_manifest
from dexrl.hub.repos import KNOWN_REPOS
from dexrl.models.pi0.tiny import write_tiny_pi0
from dexrl.models.tiny_files import write_norm_stats

PI0 = "Dexmal/libero-db-pi0"
MAIN, V1 = commit_sha("main"), commit_sha("v1.0")
ASSET_MARKERS = ("scenes", "textures", "stable_scanned_objects", "articulated_objects")


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.fixture(scope="session")
def pi0_main(tiny_pi0_dir: Path) -> dict[str, bytes]:
    return tree(tiny_pi0_dir)


@pytest.fixture(scope="session")
def pi0_v1(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """An older commit: other weights, in two shards."""
    return tree(write_tiny_pi0(tmp_path_factory.mktemp("v1") / "c", seed=1, shards=2))


@pytest.fixture(scope="session")
def dm0_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """DM0's file layout (dexrl has no DM0 network yet, so the tensors are arbitrary)."""
    import torch
    from safetensors.torch import save_file

    path = tmp_path_factory.mktemp("dm0")
    (path / "config.json").write_text(json.dumps({"model_type": "dexbotic_dm0"}))
    (path / "vocab.json").write_text("{}")
    (path / "tokenizer_config.json").write_text("{}")
    (path / "merges.txt").write_text("#version: 0.2\n")
    write_norm_stats(path, 0)
    save_file({"model.action_in_proj.weight": torch.zeros(8, 32, dtype=torch.bfloat16)},
              str(path / "model.safetensors"))
    return tree(path)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "dexrl-home"


@pytest.fixture
def hub(pi0_main, pi0_v1, dm0_files, home, monkeypatch):
    """The stand-in hub with HF_ENDPOINT pointing at it and no token or offline flag around."""
    def repo(repo_id: str, files: dict[str, bytes], **kw) -> FakeRepo:
        sha = commit_sha(repo_id)
        return FakeRepo(repo_id, {sha: files}, {"main": sha}, **kw)

    with HubServer(lifetime=60) as server:
        server.add(FakeRepo(PI0, {MAIN: pi0_main, V1: pi0_v1}, {"main": MAIN, "v1.0": V1}))
        server.add(repo("Dexmal/DM0-libero", dm0_files))
        server.add(repo("acme/private-pi0", pi0_main, private=True))
        server.add(repo("acme/gated-pi0", pi0_main, gated=True))
        server.add(repo("acme/not-a-checkpoint", {"README.md": b"# a dataset\n",
                                                   "data/part-0.bin": b"\1" * 4096}))
        bad_cfg = json.loads(pi0_main["config.json"])
        bad_cfg["llm_config"]["intermediate_size"] += 8
        server.add(repo("acme/wrong-shapes",
                        {**pi0_main, "config.json": json.dumps(bad_cfg).encode()}))
        assets = {f"{m}/{m}.xml": f"<{m}/>".encode() for m in ASSET_MARKERS}
        server.add(repo("RLinf/LIBERO-assets", {**assets, "README.md": b"assets"},
                        repo_type="dataset"))
        server.add(repo("acme/broken-assets", {"scenes/a.xml": b"<a/>"}, repo_type="dataset"))
        use_hub(server, monkeypatch, home, unset=("LIBERO_ASSETS_REPO",))
        yield server


run = partial(cli.run, "download")


def assert_fails(result, *fragments: str) -> None:
    """Exit 2, exactly one ``error:`` and one ``hint:`` line, no traceback, the fragments."""
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert sum(line.startswith("error:") for line in lines) == 1, result.output
    assert sum(line.startswith("hint:") for line in lines) == 1, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.output, result.output


def manifest_of(path: Path) -> Manifest | None:
    return read_download_manifest(path)


def test_known_repo_downloads_verifies_and_records_provenance(hub, home, pi0_main) -> None:
    result = run(PI0)
    assert result.exit_code == 0, result.output
    dest = home / "checkpoints" / "Dexmal" / "libero-db-pi0"
    assert {k: v for k, v in tree(dest).items() if not k.startswith(".cache/")
            and k != MANIFEST_NAME} == pi0_main
    manifest = manifest_of(dest)
    assert manifest.verified and manifest.commit == MAIN and manifest.revision == "main"
    assert manifest.repo_id == PI0 and manifest.endpoint == hub.url
    assert manifest.files == {k: len(v) for k, v in pi0_main.items()}
    assert manifest.changed_files(dest) == []
    from dexrl.checkpoints.verify import verify_checkpoint

    params = verify_checkpoint(dest).weights.parameters
    for text in (f"main → {MAIN}", "dexbotic_pi0", f"{params:,} in", "float32",
                 "tensor names and shapes", f"Downloaded {PI0} to: {dest}",
                 f"actor.model.model_path={dest}", "no override needed"):
        assert text in result.output, result.output
    from dexrl.models.pi0.policy import Pi0Policy

    Pi0Policy.load_network(dest)  # verified means the loader takes it


def test_dm0_is_verified_as_far_as_dexrl_can_and_says_so(hub) -> None:
    result = run("Dexmal/DM0-libero")
    assert result.exit_code == 0, result.output
    assert "not checked for dexbotic_dm0" in result.output
    assert "no override needed" in result.output and "--model dm0" in result.output
    manifest = manifest_of(checkpoint_dir("Dexmal/DM0-libero"))
    assert manifest.model_type == "dexbotic_dm0"
    assert manifest.checks == ["files", "weight headers", "norm stats"]


def test_a_known_repo_with_the_wrong_model_type(hub, pi0_main) -> None:
    hub.repos["Dexmal/DM0-libero"].commits = {MAIN: pi0_main}
    hub.repos["Dexmal/DM0-libero"].refs = {"main": MAIN}
    assert_fails(run("Dexmal/DM0-libero"), "is 'dexbotic_pi0' but the config trains "
                 "'dexbotic_dm0'")


def test_default_folder_is_the_model_configs_model_path(home, monkeypatch) -> None:
    from dexrl.config.compose import compose

    monkeypatch.setenv("DEXRL_HOME", str(home))
    for repo in KNOWN_REPOS.values():
        cfg = compose(f"libero_spatial_ppo_{repo.model_type}", [])
        assert cfg.actor.model.model_path == str(checkpoint_dir(repo.repo_id))
    monkeypatch.delenv("DEXRL_HOME")
    cfg = compose("libero_spatial_ppo_dexbotic_pi0", [])
    assert cfg.actor.model.model_path == str(checkpoint_dir(PI0))
    default = Path.home() / ".cache" / "dexrl" / "checkpoints" / "Dexmal" / "libero-db-pi0"
    assert checkpoint_dir(PI0) == default


@pytest.mark.parametrize("revision", ["v1.0", V1])
def test_pinned_revision(hub, tmp_path, pi0_v1, revision) -> None:
    dest = tmp_path / "pinned"
    result = run(PI0, "--revision", revision, "--local-dir", str(dest))
    assert result.exit_code == 0, result.output
    manifest = manifest_of(dest)
    assert manifest.commit == V1 and manifest.revision == revision
    assert (dest / "model.safetensors.index.json").read_bytes() == pi0_v1[
        "model.safetensors.index.json"]
    assert f"{revision} → {V1}" in result.output
    assert "no override needed" not in result.output  # not the default folder


def test_switching_revision_in_place_drops_the_old_shards(hub, tmp_path, pi0_main) -> None:
    dest = tmp_path / "d"
    (dest / "mine.txt").parent.mkdir()
    assert run(PI0, "--revision", "v1.0", "--local-dir", str(dest)).exit_code == 0
    (dest / "mine.txt").write_text("not from the hub")
    result = run(PI0, "--local-dir", str(dest))
    assert result.exit_code == 0, result.output
    assert "removed 3 file(s) of an earlier revision" in result.output
    assert not (dest / "model.safetensors.index.json").exists()
    assert (dest / "mine.txt").is_file()  # only files the hub put there go
    assert sorted(manifest_of(dest).files) == sorted(pi0_main)


def test_interrupted_download_resumes(hub, home, monkeypatch, pi0_main) -> None:
    # huggingface_hub writes 10 MB chunks; smaller ones let a tiny file be cut after some bytes
    # reached the disk, which is what a dropped connection does to a real multi-GB shard.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 4096)
    hub.cut_downloads[(PI0, "model.safetensors")] = 1
    first = run(PI0)
    assert_fails(first, "broke off", "IncompleteRead", "run the same command again")
    dest = checkpoint_dir(PI0)
    assert manifest_of(dest) is None
    partial = list((dest / ".cache").rglob("*.incomplete"))
    assert len(partial) == 1 and partial[0].stat().st_size > 0
    kept = partial[0].stat().st_size
    second = run(PI0)
    assert second.exit_code == 0, second.output
    gets = hub.file_gets("/model.safetensors")
    assert [g.range for g in gets] == [None, f"bytes={kept}-"]
    assert (dest / "model.safetensors").read_bytes() == pi0_main["model.safetensors"]
    assert manifest_of(dest).verified


def test_private_repo_without_login_is_401(hub) -> None:
    result = run("acme/private-pi0")
    assert_fails(result, "not found", "huggingface-cli login")
    assert any(s.path.startswith("/api/models/acme/private-pi0") for s in hub.seen)


def test_private_repo_with_hf_token(hub, home) -> None:
    result = run("acme/private-pi0", HF_TOKEN=hub.token)
    assert result.exit_code == 0, result.output
    assert all(s.authorization == f"Bearer {hub.token}" for s in hub.seen)


def test_gated_repo_without_access(hub) -> None:
    result = run("acme/gated-pi0")
    assert_fails(result, "gated", f"{hub.url}/acme/gated-pi0", "HF_TOKEN")
    assert manifest_of(checkpoint_dir("acme/gated-pi0")) is None


def test_rejected_token(hub) -> None:
    assert_fails(run(PI0, HF_TOKEN="hf_stale"), "refused", "HTTP 401", "token")


def test_unknown_repo_is_404(hub, home) -> None:
    result = run("Dexmal/libero-db-pi", HF_TOKEN=hub.token)
    assert_fails(result, "Dexmal/libero-db-pi was not found", "Did you mean 'Dexmal/libero-db-pi0'")
    assert not (home / "checkpoints").exists()


def test_unknown_revision_is_404(hub, home) -> None:
    assert_fails(run(PI0, "--revision", "v9"), "revision 'v9' does not exist", "--revision")
    assert not (home / "checkpoints").exists()


def test_not_a_dexbotic_checkpoint_keeps_files_unverified(hub) -> None:
    result = run("acme/not-a-checkpoint")
    assert_fails(result, "not a usable Dexbotic checkpoint", "no config.json",
                 "not a Dexbotic π0/DM0 checkpoint")
    dest = checkpoint_dir("acme/not-a-checkpoint")
    assert (dest / "README.md").is_file() and (dest / "data" / "part-0.bin").is_file()
    assert manifest_of(dest) is None


def test_weights_that_do_not_fit_the_config(hub) -> None:
    result = run("acme/wrong-shapes")
    assert_fails(result, "wrong shape", "model.llm.layers.0.mlp")
    assert manifest_of(checkpoint_dir("acme/wrong-shapes")) is None


def test_redownload_of_a_failed_folder_removes_a_stale_manifest(hub, tmp_path) -> None:
    dest = tmp_path / "d"
    assert run(PI0, "--local-dir", str(dest)).exit_code == 0
    hub.repos[PI0].refs["main"] = V1
    hub.repos[PI0].commits[V1] = {**hub.repos[PI0].commits[V1], "norm_stats.json": b"[]"}
    assert_fails(run(PI0, "--local-dir", str(dest)), "norm_stats.json")
    assert manifest_of(dest) is None


def test_hub_errors_while_looking_up_and_while_downloading(hub) -> None:
    hub.fail_paths[f"/api/models/{PI0}/revision/main"] = 500
    assert_fails(run(PI0), "the hub failed to look up", "500", "try again later")
    # huggingface_hub retries 5xx on file requests for ~15 s; a 429 it gives up on at once.
    hub.fail_paths = {f"/{PI0}/resolve/{MAIN}/config.json": 429}
    assert_fails(run(PI0), "broke off", "429", "run the same command again")
    assert manifest_of(checkpoint_dir(PI0)) is None


def test_unreachable_hub(hub, monkeypatch) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert_fails(run(PI0), "cannot reach the hub", "HF_HUB_OFFLINE=1")


def test_full_disk_and_read_only_errors_are_explained(tmp_path: Path) -> None:
    with pytest.raises(DexrlError, match=f"cannot write to {tmp_path}$") as caught, \
            hub_errors(PI0, "main", "http://hub", stage="download", dest=tmp_path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert caught.value.code == "disk-full" and "HF_HOME" in caught.value.hint
    with pytest.raises(DexrlError, match="cannot write there") as caught, \
            hub_errors(PI0, "main", "http://hub", stage="download", dest=Path("/d")):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    assert caught.value.hint and caught.value.where == "/d"


def test_offline_with_a_verified_copy(hub) -> None:
    assert run(PI0).exit_code == 0
    hub.seen.clear()
    result = run(PI0, HF_HUB_OFFLINE="1")
    assert result.exit_code == 0, result.output
    assert "offline re-check" in result.output and MAIN in result.output
    assert hub.seen == []


def test_offline_without_a_copy(hub) -> None:
    assert_fails(run(PI0, HF_HUB_OFFLINE="1"), "offline mode", "unset HF_HUB_OFFLINE")
    assert hub.seen == []


def test_offline_copy_that_changed_loses_its_manifest(hub) -> None:
    assert run(PI0).exit_code == 0
    dest = checkpoint_dir(PI0)
    weights = dest / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    assert_fails(run(PI0, HF_HUB_OFFLINE="1"), "model.safetensors", "unset HF_HUB_OFFLINE")
    assert manifest_of(dest) is None


def test_offline_copy_of_another_revision(hub) -> None:
    assert run(PI0).exit_code == 0
    assert_fails(run(PI0, "--revision", "v1.0", HF_HUB_OFFLINE="1"), "not revision 'v1.0'")


def test_destination_that_cannot_be_written(hub, tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run(PI0, "--local-dir", str(blocker / "ckpt"))
    assert_fails(result, "cannot write there", "--local-dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_destination_without_permission(hub, tmp_path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        assert_fails(run(PI0, "--local-dir", str(locked / "ckpt")), "cannot write there")
    finally:
        locked.chmod(0o755)


def test_folder_with_other_files_needs_force(hub, tmp_path) -> None:
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    assert_fails(run(PI0, "--local-dir", str(dest)), "did not put there", "--force")
    assert run(PI0, "--local-dir", str(dest), "--force").exit_code == 0
    assert (dest / "notes.txt").read_text() == "keep me"


def test_include_that_matches_nothing(hub) -> None:
    assert_fails(run(PI0, "--include", "*.gguf"), "matches --include/--exclude", "config.json")


def test_hf_transfer_flag_without_the_package_falls_back(hub, monkeypatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_ENABLE_HF_TRANSFER", True)
    result = run(PI0)
    assert result.exit_code == 0, result.output
    assert "hf_transfer is not installed" in result.output


def test_bad_repo_id_and_missing_argument(hub) -> None:
    assert_fails(run("not a repo"), "not a Hugging Face repo id")
    assert_fails(run(), "which repository?", "--list")
    assert hub.seen == []


def test_list_shows_known_repos_and_their_state(hub) -> None:
    result = run("--list")
    assert result.exit_code == 0, result.output
    assert PI0 in result.output and "Dexmal/DM0-libero" in result.output
    assert "not downloaded" in result.output
    assert run(PI0).exit_code == 0
    assert f"verified, commit {MAIN[:12]}" in run("--list").output


def test_json_summary_and_list(hub, home) -> None:
    result = run(PI0, "--json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    dest = home / "checkpoints" / "Dexmal" / "libero-db-pi0"
    assert done["schema"] == "dexrl.download/1" and done["path"] == str(dest)
    assert done["manifest"]["commit"] == MAIN and done["manifest"]["verified"] is True
    assert done["override"] == f"actor.model.model_path={dest}"
    listed = json.loads(run("--list", "--json").stdout)["repositories"]
    assert {r["repo_id"]: (r["verified"], r["commit"]) for r in listed}[PI0] == (True, MAIN)


@pytest.fixture
def libero_site(tmp_path, monkeypatch) -> Path:
    """A fake installed ``libero`` package; returns where it looks for assets."""
    root = tmp_path / "site" / "libero"
    (root / "libero").mkdir(parents=True)
    monkeypatch.setattr(libero_assets, "_package_dir",
                        lambda name: root if name == "libero" else None)
    return root / "libero" / "assets"


def test_libero_assets_are_fetched_verified_and_linked(hub, home, libero_site) -> None:
    result = run("--libero-assets")
    assert result.exit_code == 0, result.output
    assert libero_site.is_symlink() and libero_assets.is_asset_tree(libero_site)
    assert libero_site.resolve() == (home / "libero-assets").resolve()
    assert any(s.path.startswith("/api/datasets/RLinf/LIBERO-assets") for s in hub.seen)
    manifest = read_download_manifest(home / "libero-assets",
                                                libero_assets.ASSETS_MANIFEST)
    assert manifest.verified and manifest.repo_type == "dataset"
    again = run("--libero-assets")
    assert again.exit_code == 0 and "already in place" in again.output


def test_incomplete_libero_assets_are_not_linked(hub, libero_site, monkeypatch) -> None:
    monkeypatch.setenv("LIBERO_ASSETS_REPO", "acme/broken-assets")
    assert_fails(run("--libero-assets"), "incomplete", "textures/: missing")
    assert not libero_site.exists() and not libero_site.is_symlink()


def test_libero_assets_offline(hub, libero_site) -> None:
    assert_fails(run("--libero-assets", HF_HUB_OFFLINE="1"), "offline",
                 "python -m dexrl.hub.libero_assets")
    assert hub.seen == []


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    code = "import sys; from dexrl.cli import main; sys.argv = ['dexrl', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, "download", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)


@pytest.mark.spawns
def test_hub_variables_set_before_import_are_honoured(hub, home) -> None:
    """huggingface_hub reads HF_ENDPOINT/HF_HUB_OFFLINE at import: check a fresh process."""
    env = {"HF_ENDPOINT": hub.url, "DEXRL_HOME": str(home),
           "HF_TOKEN_PATH": str(home / "no-token")}
    online = _cli(["acme/not-a-checkpoint"], env)
    assert online.returncode == 2 and "no config.json" in online.stderr, online.stderr
    assert any("/api/models/acme/not-a-checkpoint" in s.path for s in hub.seen)
    hub.seen.clear()
    offline = _cli([PI0], {**env, "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2 and "offline mode" in offline.stderr, offline.stderr
    assert "Traceback" not in offline.stderr and hub.seen == []
