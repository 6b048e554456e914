"""MEMO-style coverage-guided model generation for differential testing of DL libraries (``twinspect fuzz``).

Modules: :mod:`catalogue` (layer APIs, parameter spaces, coverage denominators), :mod:`graph` (the model
spec and its Keras build), :mod:`coverage`, :mod:`seeds`, :mod:`reduction`, :mod:`operators`,
:mod:`prior_operators` (MEMO_o: DeepMutation, LEMON, Audee), :mod:`search` (Algorithm 2), :mod:`backends` (isolated worker processes per system under test),
:mod:`oracles`, :mod:`triage`, :mod:`trackers`, :mod:`confirm`, :mod:`campaign`, :mod:`report`, :mod:`cli`.
"""
