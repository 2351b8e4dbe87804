"""A resume that would add or remove a policy head (PPO ↔ GRPO's value head, flow_noise's noise
head) is refused, even with ``--allow-changes``; other changes keep their rules."""

from __future__ import annotations

import pytest

from dexrl.config.compose import compose
from dexrl.config.resume_rules import refuse_unsafe_changes
from dexrl.errors import DexrlError

NAME = "reach_cued_ppo_dexbotic_pi0"


@pytest.mark.parametrize(("run", "resumed"), [
    ([], ["+algo=grpo_tasks"]),
    (["+algo=grpo_tasks"], ["+algo=grpo_tasks", "actor.model.add_value_head=true"]),
    ([], ["+noise=flow_noise"]),
    (["+noise=flow_noise"], ["+noise=flow_noise", "actor.model.dexbotic.noise_method=flow_cps"]),
])
@pytest.mark.parametrize("allow", [False, True])
def test_a_head_change_is_refused_even_when_changes_are_allowed(
        run: list[str], resumed: list[str], allow: bool) -> None:
    with pytest.raises(DexrlError) as info:
        refuse_unsafe_changes(compose(NAME, run), compose(NAME, resumed), allow)
    assert info.value.code == "resume-heads-changed"
    assert any("add_value_head" in d or "noise_method" in d for d in info.value.details)


def test_other_changes_keep_their_rules() -> None:
    old = compose(NAME, ["+noise=flow_noise"])
    wider = compose(NAME, ["+noise=flow_noise", "actor.model.dexbotic.noise_logvar_range=[0.1,2]"])
    with pytest.raises(DexrlError) as info:
        refuse_unsafe_changes(old, wider, False)
    assert info.value.code == "resume-unsafe-changes"
    refuse_unsafe_changes(old, wider, True)
    plain = compose(NAME)
    refuse_unsafe_changes(plain, compose(NAME, ["actor.model.dexbotic.noise_method=flow_cps"]),
                          True)
