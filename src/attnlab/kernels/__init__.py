"""Numerics behind the public modules (mappings, efficient), which import them; two
chapters show them too: chapter 3 the 1-D TV prox (:mod:`.tv1d`), chapter 8 the Triton kernel.

* :mod:`.sparse` — thresholds of sparsemax, 1.5-entmax and α-entmax (sort, threshold
  iteration with exact support finalisation, bisection).
* :mod:`.tv1d` — the exact proximal operator of the 1-D total variation (Condat 2013).
* :mod:`.triton_flash`, :mod:`.triton_flash_bwd`, :mod:`.triton_tiles` — FlashAttention
  forward and backward in Triton (CUDA; Triton's interpreter in the tests).
"""
