def partition(a, lo, hi):
    pivot = a[hi]
    i = lo - 1
    for j in range(lo, hi):
        if a[j] < pivot:
            i += 1
            t = a[i]
            a[i] = a[j]
            a[j] = t
    t = a[i + 1]
    a[i + 1] = a[hi]
    a[hi] = t
    return i + 1


def quick_sort(a, lo, hi):
    if lo < hi:
        p = partition(a, lo, hi)
        quick_sort(a, lo, p - 1)
        quick_sort(a, p + 1, hi)


a = [5, 2, 9, 1, 7]
quick_sort(a, 0, len(a) - 1)
print(a)
