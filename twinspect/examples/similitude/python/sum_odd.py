def sum_odd(a):
    s = 0
    for i in range(len(a)):
        if a[i] % 2 != 0:
            s += a[i]
    return s


print(sum_odd([5, 2, 9, 1, 7]))
