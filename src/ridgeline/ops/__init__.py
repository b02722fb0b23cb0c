"""The op library: one package per op family (contract, kernels, launch rules, peers, profile hook).

`ridgeline.core.registry` imports every package here on first use; importing one registers its ops. A package
names the public functions it gives `ridgeline` in `EXPORTS` (name -> module), loaded only when first used.
"""
