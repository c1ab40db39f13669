"""Private numerics behind the public modules (imported by them, never by chapters).

* :mod:`.sparse` — thresholds of sparsemax, 1.5-entmax and α-entmax (sort, threshold
  iteration with exact support finalisation, bisection).
* :mod:`.tv1d` — the exact proximal operator of the 1-D total variation (Condat 2013).
"""
