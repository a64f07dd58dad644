"""Config helpers shared by the entry points: the repository root and the OmegaConf resolvers."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]



def register_resolvers() -> None:
    """Register ``${specdec_root:}`` (the repository root; the package is installed editable) and
    ``${specdec_choice:<group>}`` (the option chosen for a config group, e.g. the model pair)."""
    if not OmegaConf.has_resolver("specdec_root"):
        OmegaConf.register_new_resolver("specdec_root", lambda: str(ROOT))
    if not OmegaConf.has_resolver("specdec_choice"):
        OmegaConf.register_new_resolver("specdec_choice", _choice)


def _choice(group: str, *, _root_) -> str:
    # Under @hydra.main the choices live in HydraConfig; a compose(return_hydra_config=True)
    # config carries them in its own `hydra` node.
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return str(HydraConfig.get().runtime.choices[group])
    choices = OmegaConf.select(_root_, "hydra.runtime.choices")
    if choices is None or group not in choices:
        raise ValueError(f"no choice recorded for config group {group!r}; compose the config "
                         "through Hydra (return_hydra_config=True) or set the value explicitly")
    return str(choices[group])
