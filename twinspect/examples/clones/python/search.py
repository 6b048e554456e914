"""Searching helpers for sorted sequences."""


def binary_search(items, target):
    """Return the index of target in the sorted list items, or -1."""
    low = 0
    high = len(items) - 1
    while low <= high:
        mid = (low + high) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            low = mid + 1
        else:
            high = mid - 1
    return -1


def lower_bound(items, target):
    """Return the first index whose item is not less than target."""
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def clamp(value, low, high):
    """Limit value to the closed interval [low, high]."""
    return max(low, min(value, high))
