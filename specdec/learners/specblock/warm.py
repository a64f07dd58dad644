"""Warm-start a SpecBlock drafter from a trained EAGLE-3 drafter of the same target.

Not in SpecBlock's paper or code (they train from the target's layers for ~90k samples on 8
GPUs); ours, for budgets where that is out of reach (the 2-core CPU trains ~1 block-1 step per
4 s). The two networks read the same inputs: EAGLE-3's position ``t`` reads ``(g_t = fuse(f_t),
e(x_{t+1}))`` and predicts ``x_{t+2}``; SpecBlock's slot 0 of position ``i`` reads ``(c_i = W_c
f_i, e(x_{i+1}))`` and predicts ``x_{i+2}`` too. So (symbols of ``net.py`` / ``eagle3/net.py``):

    W_c                  <- EAGLE-3 fuse             (kH -> H)
    RMSNorm(c), RMSNorm(e) <- EAGLE-3 norm_cond, norm_embed
    W_f[:, :2H]          <- EAGLE-3 fc, its [e ; g] halves swapped to SpecBlock's [c ; e] order
    W_f[:, 2H:]          <- the seeded random init times ``query_scale`` (slots start nearly equal)
    decoder layer 0      <- EAGLE-3's decoder layer
    decoder layers >= 1  <- the target's copies with ``o_proj`` and ``down_proj`` zeroed: each
                            starts as the identity (its residual branches learn from zero)
    final norm, head, d2t <- EAGLE-3's (its reduced vocabulary becomes SpecBlock's)

With ``query_scale=0`` slot 0 at a trace's first position equals EAGLE-3's first draft step
exactly (test); elsewhere it starts close to it, not equal, because block 1's cross attention
sees all ``K`` slots of earlier positions where EAGLE-3 sees one key each. (Warming twice
scales the query term twice.)
"""

from __future__ import annotations

import torch

from specdec.errors import BadInput
from specdec.nets.eagle3.net import Eagle3Net
from specdec.nets.specblock.net import SpecBlockNet


def warm_from_eagle3(
    net: SpecBlockNet, eagle: Eagle3Net, *, query_scale: float = 0.1
) -> SpecBlockNet:
    """Overwrite ``net``'s shared parts with ``eagle``'s (mapping in the module docstring).

    Raises:
        ValueError: the two read different target layers or have different widths.
    """
    h = net.config.hidden_size
    if tuple(eagle.target_layers) != tuple(net.target_layers) or eagle.hidden_size != h:
        raise BadInput(
            f"the EAGLE-3 drafter reads target layers {list(eagle.target_layers)} at "
            f"width {eagle.hidden_size}; SpecBlock asks for "
            f"{list(net.target_layers)} at width {h}: use the same target_layers"
        )
    dec = eagle.decoder
    with torch.no_grad():
        net.cond_proj.weight.copy_(eagle.fuse.weight)
        net.norm_cond.load_state_dict(eagle.norm_cond.state_dict())
        net.norm_token.load_state_dict(eagle.norm_embed.state_dict())
        fc = eagle.fc.weight  # [H, 2H]: [e ; g]
        net.fuse.weight[:, :h].copy_(fc[:, h:])
        net.fuse.weight[:, h : 2 * h].copy_(fc[:, :h])
        net.fuse.weight[:, 2 * h :].mul_(query_scale)
        net.layers[0].load_state_dict(dec.model.layers[0].state_dict())
        for layer in net.layers[1:]:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        net.norm.load_state_dict(dec.model.norm.state_dict())
        vd = dec.token_map.numel()
        if net.head.weight.shape[0] != vd:
            net.head = torch.nn.Linear(h, vd, bias=False).to(net.head.weight)
        net.head.weight.copy_(dec.lm_head.weight)
        net.token_map = dec.token_map.clone().to(net.token_map.device)
    net.config.draft_vocab_size = int(vd)
    net.meta["draft_vocab_size"] = int(vd)
    return net
