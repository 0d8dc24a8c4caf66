"""Switchyard benchmark: a fast fake upstream, a load generator and a driver.

``python -m bench.run`` measures DIRECT (client -> upstream) and THROUGH (client ->
Switchyard -> upstream) in the same run, alternating rounds; see ``bench/README.md``.
Nothing here imports Django: the gateway is only ever driven as a separate process.
"""
