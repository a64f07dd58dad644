"""``python -m specdec.train +experiment=<name>``: train an auxiliary learner (Lightning + Hydra).

Stages (``stage=``):

* ``data``: call the experiment's ``data_gen`` (writes training data, e.g. target traces);
* ``fit``: seed → datamodule → learner → logger → callbacks → ``Trainer.fit`` (resuming from
  ``ckpt_path`` when set, else from the run folder's ``checkpoints/last.ckpt``) →
  ``Trainer.test`` on the best checkpoint → optional ``export(learner, out_dir)`` (e.g. the plain
  ``nn.Module`` as safetensors) → with ``logger=wandb``, the exported folder as a model artifact.
  Checkpoints load with ``weights_only=True``: tensors and plain values only, so a checkpoint
  from elsewhere cannot run code.

The run folder is ``outputs/train/<task_name>/<config hash>/`` (``learners/resume.py``):
rerunning a killed command resumes it, mid-epoch included (``learners/resumable.py``), with the
random generators where the killed run had them (``learners/rng_state.py``), and the
W&B run is named ``<task_name>-<config hash>`` in group ``<task_name>``
(``conf/logger/wandb.yaml``).
The export goes to ``<run dir>/export/``; ``export.install=true`` writes the shipped folder the
method reads instead, and never over existing files without ``export.force=true``
(``learners/install.py``), checked before the fit starts.

Callbacks are config, as in lightning-hydra-template: every node of ``cfg.callbacks``
(``conf/callbacks/``) is instantiated. ``model_checkpoint`` keeps the best checkpoint by the
experiment's ``monitor`` (a validation metric and ``min``/``max``), ``last_checkpoint`` the
latest state (``last.ckpt``). "Best" is
what gets tested *and exported*: ``Trainer.test(ckpt_path=best)`` loads the best weights into the
learner, so the exported module is the one whose test metrics are reported (``last.ckpt`` is for
resuming; ``scripts/export_draft.py CKPT`` exports a draft from any checkpoint). Without a
checkpoint (``fast_dev_run``) the current weights are tested and exported.

Lightning is imported only here and in ``specdec.learners``; eval loads exported heads without it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from specdec.cli_check import check_command_line
from specdec.config import register_resolvers
from specdec.errors import BadInput, exit_on_input_error
from specdec.learners.install import export_folder
from specdec.learners.resume import check_fits, resume_checkpoint, run_name, save_last
from specdec.learners.scale import check_single_process, exportable
from specdec.paths import CONF_DIR

if TYPE_CHECKING:
    import lightning as L
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers import Logger

log = logging.getLogger(__name__)


def build_logger(cfg: DictConfig) -> Logger | bool:
    """The ``train`` node of the shared ``logger`` group (conf/logger/), with the resolved run
    config logged as hyperparameters; ``False`` when the node is null (no logger)."""
    if cfg.logger.train is None:
        return False  # Trainer(logger=None) would mean Lightning's default logger
    logger = instantiate(cfg.logger.train)
    logger.log_hyperparams(
        {
            k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in cfg.items()
            if k != "hydra"
        }
    )
    return logger


def build_callbacks(cfg: DictConfig) -> list[Callback]:
    """Every node of ``cfg.callbacks`` (conf/callbacks/) in config order, null nodes skipped."""
    callbacks = []
    for name, node in (cfg.get("callbacks") or {}).items():
        if node is None:
            continue
        if not OmegaConf.is_dict(node) or "_target_" not in node:
            raise TypeError(
                f"callbacks.{name} is not a _target_ config (got {node!r}); give it a "
                f"_target_ or drop it with callbacks.{name}=null"
            )
        callbacks.append(instantiate(node))
    return callbacks


def best_checkpoint(trainer: L.Trainer) -> str | None:
    """The checkpoint a monitoring ``ModelCheckpoint`` ranks best (without one: the latest
    checkpoint); None when none was written (``fast_dev_run``, no validation ran)."""
    monitoring = [c for c in trainer.checkpoint_callbacks if getattr(c, "monitor", None)]
    chosen = monitoring[0] if monitoring else trainer.checkpoint_callback
    return getattr(chosen, "best_model_path", "") or None


def check_export(cfg: DictConfig, out_dir: Path) -> Path | None:
    """Where the export will go, refused now (``BadInput``) rather than after the fit when it
    would overwrite files without ``export.force=true`` (``learners/install.py``)."""
    if cfg.export is None:
        return None
    keys = {k: cfg.export[k] for k in ("folder", "install", "asset", "force") if k in cfg.export}
    return export_folder(out_dir, **keys)


def log_export(logger: Logger | bool, folder: Path, cfg: DictConfig) -> None:
    """With ``logger=wandb``: the exported folder as a ``model`` artifact named
    ``<task_name>-<config hash>`` (other loggers: nothing)."""
    from lightning.pytorch.loggers import WandbLogger

    if not isinstance(logger, WandbLogger):
        return
    import wandb

    install = bool(cfg.export.get("install", False))
    artifact = wandb.Artifact(
        run_name(cfg),
        type="model",  # the run folder's hash, as the run
        metadata={"experiment": cfg.task_name, "installed": install, "folder": str(folder)},
    )
    artifact.add_dir(str(folder))
    logger.experiment.log_artifact(
        artifact, aliases=["latest", "installed"] if install else ["latest"]
    )


def check_placement(cfg: DictConfig) -> None:
    """The run's one device check before anything loads (``check_before_loading``), on the
    placement of the experiment's pair (``model.placement``; none: nothing to check)."""
    from specdec.models.placement import Placement, check_before_loading

    if isinstance(cfg.get("model"), DictConfig):
        check_before_loading(Placement.from_config(cfg.model))


def train(cfg: DictConfig) -> dict[str, float]:
    """Run the configured stage; returns the final metrics (empty for ``stage=data``)."""
    check_placement(cfg)  # before data_gen or the learner loads the pair
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.stage == "data":
        if cfg.data_gen is None:
            raise BadInput("this experiment has no data_gen; run stage=fit")
        check_single_process("data")  # never two ranks writing one chunk
        instantiate(cfg.data_gen)()
        return {}
    if cfg.stage != "fit":
        raise BadInput(f"unknown stage {cfg.stage!r}; use stage=data or stage=fit")
    if cfg.learner is None or cfg.datamodule is None:
        raise BadInput(
            "no learner/datamodule configured: pass +experiment=<name> (see conf/experiment/)"
        )
    check_export(cfg, out_dir)  # a refusal comes before Lightning is even imported
    ckpt_path = resume_checkpoint(cfg, out_dir)
    import lightning as L

    from specdec.learners.data_fit import check_data_fits, data_key
    from specdec.learners.resumable import make_resumable
    from specdec.learners.rng_state import RngState

    L.seed_everything(cfg.seed, workers=True, verbose=False)  # stderr: only an error line
    log.info("seed set to %d", cfg.seed)
    datamodule = instantiate(cfg.datamodule)
    learner = instantiate(cfg.learner)
    # data or a checkpoint of another target or architecture: one error line, not a traceback
    check_data_fits(learner, datamodule, data_key=data_key(cfg))
    if ckpt_path is not None:
        check_fits(learner, ckpt_path, cfg)
    logger = build_logger(cfg)
    # RngState: generator states in each checkpoint, so a resumed fit repeats the straight one
    trainer = instantiate(cfg.trainer, logger=logger, callbacks=[*build_callbacks(cfg), RngState()])
    if trainer.world_size == 1:  # several ranks: Lightning's DistributedSampler orders each epoch
        make_resumable(datamodule, cfg.seed)
    try:
        # a checkpoint is a pickle: load tensors and plain values only, never code it carries
        # (Lightning would load an http ckpt_path with weights_only=False)
        trainer.fit(learner, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
        save_last(trainer, out_dir)  # a rerun of this finished command trains nothing
        best = best_checkpoint(trainer)
        log.info(
            "testing and exporting %s (monitor: %s, %s)",
            best or "the current weights",
            cfg.monitor.metric,
            cfg.monitor.mode,
        )
        # loads the best checkpoint into `learner`: the export below writes those weights
        trainer.test(learner, datamodule=datamodule, ckpt_path=best, weights_only=True)
        if cfg.export is not None and trainer.is_global_zero:  # one writer under DDP / FSDP
            from lightning.pytorch.strategies import FSDPStrategy

            sharded = isinstance(trainer.strategy, FSDPStrategy)
            folder = instantiate(cfg.export)(
                exportable(learner, best, sharded=sharded, build=lambda: instantiate(cfg.learner)),
                out_dir,
            )
            log.info("exported to %s", folder)
            if folder is not None:
                log_export(logger, Path(folder), cfg)
    finally:
        # close a W&B run the logger opened, also after an error (lightning-hydra-template)
        wandb = sys.modules.get("wandb")
        if wandb is not None and wandb.run is not None:
            wandb.finish()
    return {k: float(v) for k, v in trainer.callback_metrics.items()}


EXPERIMENTS = CONF_DIR / "experiment"


def check_experiment(argv: list[str]) -> None:
    """Refuse ``+experiment=<name>`` naming no ``conf/experiment/<name>.yaml`` before Hydra
    composes anything (``BadInput``), suggesting the generic any-pair experiment its name starts
    with (``eagle3_mypair``: ``+experiment=eagle3 model=hf model.target=...``)."""
    names = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml"))
    presets = [p.stem for p in (EXPERIMENTS.parent / "model").glob("*.yaml")]
    generic = [n for n in names if not any(n.endswith(f"_{m}") for m in presets)]
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key.lstrip("+~") != "experiment" or value in names:
            continue
        match = [g for g in generic if value.startswith(f"{g}_")]
        fix = (
            f"for your own pair use the generic one: python -m specdec.train "
            f"+experiment={match[0]} model=hf model.target=<hub id|folder> "
            "[model.draft=<hub id|folder>]"
            if match
            else f"pick one of: {', '.join(names)}"
        )
        raise BadInput(
            f"+experiment={value}: no such experiment (conf/experiment/{value}.yaml); {fix}"
        )


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> None:
    """Train (or generate data); a bad input ends with its message and status 2 (errors.py)."""
    with exit_on_input_error():
        train(cfg)


if __name__ == "__main__":
    register_resolvers()
    with exit_on_input_error():  # Hydra's own errors come before main: cli_check.py
        check_experiment(sys.argv[1:])  # an unknown experiment names the generic one
        check_command_line(sys.argv[1:], "train")
    main()
