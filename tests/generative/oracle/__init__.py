"""The Oracle part of the generative differential tester.

- ``workload``: seeded random workloads, as data (``Features`` says what they may hold);
- ``tables`` and ``model``: Oracle tables and what the source holds after each item;
- ``render``: the workload as V$LOGMNR_CONTENTS rows (replay file format);
- ``history``: the source's state at any SCN of the rendered log;
- ``source``: the model as the pipeline's source (snapshots and chunks AS OF SCN, the
  ``fetch_unavailable`` hook, the source's clock);
- ``runner``: a workload through the real pipeline, shrinking, the soak (``main``);
- ``judge``: the lake against the model; ``coverage``: what a workload exercises.
"""
