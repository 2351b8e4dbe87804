"""Dexbotic DM0 network: PE vision tower + linear4x projector + Qwen3 LLM + Qwen3 action expert.

Design notes: docs/design/models.md.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import Qwen3Model
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

from dexrl.models.dm0.config import Dm0Config
from dexrl.models.dm0.vision import PerceptionEncoder
from dexrl.models.flow.mot import Segment
from dexrl.models.flow.network import MoTFlowNetwork
from dexrl.models.flow.projector import build_projector


class Dm0RMSNorm(nn.Module):
    """Qwen3's RMSNorm computed in float32 throughout, rounded once to the input's dtype.

    Same parameter (``weight``) and the same float32 operations as HF's ``Qwen3RMSNorm``, so
    float32 outputs are bit-identical. In bf16 with the float32 weights DM0 keeps, HF's rounds the
    normalized value to bf16, multiplies by the float32 weight into a float32 result that the MoT
    loop then rounds again: two rounding conversions and a float32 activation per norm, where this
    makes one (docs/performance.md).
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Normalize over the last dim; the output has the input's dtype."""
        x = hidden_states.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (self.weight * x).to(hidden_states.dtype)


def lean_norms(tower: nn.Module) -> nn.Module:
    """Replace every HF ``Qwen3RMSNorm`` of ``tower`` by a :class:`Dm0RMSNorm` (same weights)."""
    for module in list(tower.modules()):
        for name, child in module.named_children():
            if isinstance(child, Qwen3RMSNorm):
                norm = Dm0RMSNorm(child.weight.shape[0], child.variance_epsilon)
                norm.to(device=child.weight.device, dtype=child.weight.dtype)
                setattr(module, name, norm)
    return tower


class ActionExpert(nn.Module):
    """Holds the expert's Qwen3 decoder as ``model`` (Dexbotic's causal-LM nesting)."""

    def __init__(self, config) -> None:
        super().__init__()
        self.model = lean_norms(Qwen3Model(config))
        self.model.embed_tokens = None  # the expert only ever sees embeddings


class PeVisionTower(nn.Module):
    """Holds the PE tower as ``vision_tower`` (Dexbotic's nesting of parameter names)."""

    def __init__(self, config) -> None:
        super().__init__()
        self.vision_tower = PerceptionEncoder(config)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """[N, 3, S, S] -> [N, tokens, 4·width]."""
        return self.vision_tower(pixel_values)


class Dm0Model(nn.Module):
    """The ``model.*`` module tree of a Dexbotic DM0 checkpoint."""

    def __init__(self, config: Dm0Config) -> None:
        super().__init__()
        width = config.expert.hidden_size
        self.llm = lean_norms(Qwen3Model(config.llm))
        self.action_expert = ActionExpert(config.expert)
        self.mm_vision_tower = PeVisionTower(config.vision)
        self.mm_projector = build_projector(
            config.projector_type,
            config.vision.out_width,
            config.llm.hidden_size,
            config.projector_bias,
        )
        self.action_in_proj = nn.Linear(config.action_dim, width)
        self.action_out_proj = nn.Linear(width, config.action_dim)
        self.action_time_mlp_in = nn.Linear(2 * width, width)
        self.action_time_mlp_out = nn.Linear(width, width)


class Dm0Network(MoTFlowNetwork):
    """Dexbotic DM0 with a prefix KV cache reused by every denoising step.

    Same interface as :class:`dexrl.models.pi0.network.Pi0Network` (inputs are a
    :class:`~dexrl.models.flow.network.ModelInputs`); the state is accepted for that reason and
    ignored: DM0 uses it only to turn its delta actions into absolute ones.
    """

    # FSDP units must be modules whose forward is called: the MoT loop calls the decoder layers'
    # sub-modules (the MLP among them), never the layers; the vision blocks are called whole.
    _no_split_modules = ["Qwen3MLP", "PeResidualBlock"]
    scale_text_embeddings = False
    causal_prefix = True

    def __init__(self, config: Dm0Config) -> None:
        super().__init__()
        self.config = config
        self.model = Dm0Model(config)

    @property
    def towers(self) -> tuple[nn.Module, nn.Module]:
        """The MoT towers in sequence order: prefix LLM, action expert decoder."""
        return self.model.llm, self.model.action_expert.model

    def embed_suffix(self, state: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> Segment:
        """One token per action mixing x_t with the embedding of ``t`` [B]; ``state`` is unused.

        The first action token opens a causal block, so the actions see the whole prefix and
        each other, and the prefix never sees them.
        """
        embeds = self.embed_actions(x_t, t)
        batch, length = embeds.shape[:2]
        valid = torch.ones(batch, length, dtype=torch.bool, device=embeds.device)
        ar = torch.zeros_like(valid)
        ar[:, 0] = True
        return Segment(embeds, valid, ar)
