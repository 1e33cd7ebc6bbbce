"""The Oracle part of the generative differential tester: a seeded model of Oracle tables
(``model``), its workloads rendered as LogMiner contents (``render``), replayed through the
real pipeline into a lake and judged against the model (``runner``)."""
