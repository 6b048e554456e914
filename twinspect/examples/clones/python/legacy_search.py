"""Older copies of the search helpers, kept for backwards compatibility."""


def binary_search(items, target):
    """Return the index of target in the sorted list items, or -1."""
    # Iterative version; kept identical to search.binary_search.
    low=0
    high=len(items)-1

    while low<=high:
        mid=(low+high)//2   # midpoint, rounded down
        if items[mid]==target:
            return mid
        if items[mid]<target:
            low=mid+1
        else:
            high=mid-1
    return -1


def find_position(seq, key):
    """Locate key in the ascending sequence seq; -1 when it is absent."""
    first = 0
    last = len(seq) - 1
    while first <= last:
        middle = (first + last) // 2
        if seq[middle] == key:
            return middle
        if seq[middle] < key:
            first = middle + 1
        else:
            last = middle - 1
    return -1


def bisect_left_checked(items, target):
    """Like search.lower_bound, but refuses a missing target."""
    if target is None:
        raise TypeError("target must not be None")
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo
