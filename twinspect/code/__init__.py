"""Source-code side: fragments, normalisation, encoders, k-NN indexes, clone detection, evaluation.

Later: control-flow graphs and program similitude (capability 2) live beside these modules.
"""
