"""Synthesizers: one module per method (config dataclass, pure phase functions, a thin class).

- :mod:`~dpgen_jax.synthesizers.dp_auto_gan`: :class:`DPAutoGAN` and its functional API.
"""

from dpgen_jax.synthesizers.dp_auto_gan import DPAutoGAN, DPAutoGANConfig, PAPER_PRESETS

__all__ = ["DPAutoGAN", "DPAutoGANConfig", "PAPER_PRESETS"]
