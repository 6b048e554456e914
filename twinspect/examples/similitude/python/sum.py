def total(a):
    s = 0
    for i in range(len(a)):
        s += a[i]
    return s


print(total([5, 2, 9, 1, 7]))
