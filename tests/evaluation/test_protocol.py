"""Protocols: each field with its source, older results.json files, and --compare's check."""

from __future__ import annotations

import pytest

from dexrl.errors import DexrlError
from dexrl.evaluation.protocol import (
    Protocol,
    check_same_protocol,
    default_protocol,
    protocol_differences,
    protocol_of,
    protocol_record,
)

CONFIG = {"episodes_per_task": 50, "max_episode_steps": 220, "action_chunk": 5, "num_steps": 10}
SOURCES = {"episodes_per_task": "e", "max_episode_steps": "h", "action_chunk": "c",
           "num_steps": "n"}


def standard(**config: object) -> dict:
    return protocol_record(Protocol("standard", 10, 7), {**CONFIG, **config}, SOURCES,
                           camera="256x256")


def training(**config: object) -> dict:
    return protocol_record(Protocol("training", 15, None), {**CONFIG, **config}, SOURCES,
                           camera="256x256")


def test_every_field_has_a_value_and_a_source() -> None:
    record = standard()
    assert record["name"] == "standard" and record["exact"] and record["deviations"] == []
    assert set(record["fields"]) == {"episodes_per_task", "max_episode_steps", "settle_steps",
                                     "scene_seed", "camera", "image_flip", "action_chunk",
                                     "num_steps"}
    assert all(f["source"] for f in record["fields"].values())
    assert record["fields"]["settle_steps"]["value"] == 10
    assert "num_steps_wait=10" in record["fields"]["settle_steps"]["source"]
    assert record["fields"]["scene_seed"]["value"].startswith("np.random.seed(7) once per task")
    assert training()["fields"]["settle_steps"]["value"] == 15
    assert not protocol_record(Protocol("standard", 10, 7, ("--num-steps 5",)), CONFIG,
                               SOURCES)["exact"]


def test_defaults_by_checkpoint_form() -> None:
    assert default_protocol("dexbotic", libero=True) == "standard"
    assert default_protocol("rlinf", libero=True) == "training"
    assert default_protocol("dexbotic", libero=False) == "training"


def test_an_older_results_file_reads_as_training() -> None:
    old = {"config": {"max_episode_steps": 220, "action_chunk": 5, "num_steps": 10}}
    record = protocol_of(old)
    assert record["name"] == "training" and "older results.json" in record["legacy"]
    assert protocol_differences(training(), record) == {}  # same values: the same protocol
    assert set(protocol_differences(standard(), record)) == {"name", "settle_steps",
                                                             "scene_seed"}
    assert protocol_of({"protocol": standard(), "config": {}}) == standard()


def test_compare_refuses_another_protocol() -> None:
    check_same_protocol(standard(), {"protocol": standard()}, "o.json")  # same: fine
    for other in (training(), standard(action_chunk=10),
                  protocol_record(Protocol("standard", 10, 7, ("seed=3",)), CONFIG, SOURCES,
                                  camera="256x256")):
        with pytest.raises(DexrlError) as err:
            check_same_protocol(standard(), {"protocol": other}, "o.json")
        assert err.value.code == "compare-protocol-mismatch" and err.value.where == "o.json"
        assert "--allow-protocol-mismatch" in err.value.hint
    with pytest.raises(DexrlError, match="name standard here, training there"):
        check_same_protocol(standard(), {"config": CONFIG}, "old.json")  # an older file
