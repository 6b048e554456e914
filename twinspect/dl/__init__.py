"""Deep-learning side: model adapters, data, model zoo and compression, deviated-behaviour search.

Later: model clone analysis (capability 3) and DL-library differential testing (capability 5)
live beside these sub-packages and reuse :mod:`twinspect.dl.adapters`.
"""
