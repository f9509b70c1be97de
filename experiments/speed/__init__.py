"""Speed benchmarks: DP-SGD steps against torch, Opacus and jax-privacy (``throughput``, with the
torch references in ``torch_reference``), DP-SACTGAN's step (``dpsactgan_speed``), GS-WGAN's
pretraining (``gswgan_pretrain``) and several devices (``multidevice``). ``docs/experiments.md``."""
