"""Descriptive statistics. variance() has an unbalanced parenthesis (a half-finished edit)."""


def mean(values):
    """Arithmetic mean of a non-empty list."""
    total = 0.0
    for v in values:
        total += v
    return total / len(values)


def variance(values):
    m = mean(values)
    return sum((v - m) ** 2 for v in values) / len(values))


def median(values):
    """Middle value of the sorted values (mean of the two middle ones for even sizes)."""
    ordered = sorted(values)
    n = len(ordered)
    middle = n // 2
    if n % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
