"""Synthesizers: a shared base and one module per method (config dataclass, pure phase functions,
a thin class).

- :func:`create` / :func:`available` / :func:`load`: the registry (``create("dp-auto-gan")``).
- :class:`Synthesizer`, :class:`SynthesizerConfig`, :class:`Plan`: the shared skeleton
  (``fit``, ``plan``, ``sample``, ``privacy_report``, ``save``, ``load``); :class:`Flags`: the
  speed settings, outside the configuration; :func:`training_key`: the key a method's own
  training receives from a fit's key (the one split between a method and its stage).
- :mod:`~dpgen_jax.synthesizers.dp_auto_gan`: :class:`DPAutoGAN` and its functional API.
- :mod:`~dpgen_jax.synthesizers.dp_wgan`, :mod:`~dpgen_jax.synthesizers.dp_vae`: DP-auto-GAN's
  baselines :class:`DPWGAN` and :class:`DPVAE`.
- :mod:`~dpgen_jax.synthesizers.dp_syn`: :class:`DPSYN` (Abay et al. 2018), per-label DP
  autoencoders and DP-EM.
- :mod:`~dpgen_jax.synthesizers.gs_wgan`: :class:`GSWGAN` (Chen et al. 2020, for tables), K
  discriminators on secret shards as one vectorised ensemble and a sanitised generator.
- :mod:`~dpgen_jax.synthesizers.dp_sactgan`: :class:`DPSACTGAN` (Li and Wang 2023, corrected), a
  column-token transformer GAN with one sanitised generator gradient per step and sharded critics.
- :mod:`~dpgen_jax.synthesizers.independent`: :class:`Independent`, noisy one-way marginals
  sampled independently (the benchmark's reference floor).
- :mod:`~dpgen_jax.synthesizers.mst`: :class:`MST` (McKenna et al. 2021) on public bins, with the
  optional ``mbi`` package; :mod:`~dpgen_jax.synthesizers.aim`: :class:`AIM` (McKenna et al. 2022).
- :mod:`~dpgen_jax.synthesizers.gem`: :class:`GEM` (Liu, Vietri and Wu 2021), AIM's rounds fitting a
  generator network.

Every public module or package of this folder is imported here, so a new method's module
registers itself; exporting its class by name from here is optional.
"""

from dpgen_jax.synthesizers._checkpoint import FitPaused
from dpgen_jax.synthesizers._degenerate import DegenerateReleaseWarning, check_release
from dpgen_jax.synthesizers._overrides import config_overrides
from dpgen_jax.synthesizers._hooks import Hooks
from dpgen_jax.synthesizers._matching import training_key
from dpgen_jax.synthesizers._base import (
    Flags,
    Plan,
    RecordCount,
    Release,
    Synthesizer,
    SynthesizerConfig,
    available,
    create,
    get,
    load,
    register,
)
from dpgen_jax.synthesizers.dp_auto_gan import PAPER_PRESETS, DPAutoGAN, DPAutoGANConfig
from dpgen_jax.synthesizers.dp_sactgan import DPSACTGAN, DPSACTGANConfig
from dpgen_jax.synthesizers.dp_syn import DPSYN, DPSYNConfig
from dpgen_jax.synthesizers.dp_vae import DPVAE, DPVAEConfig
from dpgen_jax.synthesizers.dp_wgan import DPWGAN, DPWGANConfig
from dpgen_jax.synthesizers.gs_wgan import GSWGAN, GSWGANConfig
from dpgen_jax.synthesizers.independent import Independent, IndependentConfig
from dpgen_jax.synthesizers.mst import MST, MSTConfig
from dpgen_jax.synthesizers.aim import AIM, AIMConfig
from dpgen_jax.synthesizers.gem import GEM, GEMConfig


def _import_methods() -> None:
    """Imports every public module or package of this folder, so that a new method registers
    itself (``@register``) by its module alone; the names above are its public exports."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_import_methods()

__all__ = [
    "config_overrides",
    "AIM",
    "AIMConfig",
    "DPAutoGAN",
    "DPAutoGANConfig",
    "DPSACTGAN",
    "DPSACTGANConfig",
    "DPSYN",
    "DPSYNConfig",
    "DPVAE",
    "DPVAEConfig",
    "DPWGAN",
    "DPWGANConfig",
    "Hooks",
    "DegenerateReleaseWarning",
    "FitPaused",
    "check_release",
    "GEM",
    "GEMConfig",
    "Flags",
    "GSWGAN",
    "GSWGANConfig",
    "Independent",
    "IndependentConfig",
    "MST",
    "MSTConfig",
    "PAPER_PRESETS",
    "Plan",
    "Synthesizer",
    "SynthesizerConfig",
    "RecordCount",
    "Release",
    "available",
    "create",
    "get",
    "load",
    "register",
    "training_key",
]
