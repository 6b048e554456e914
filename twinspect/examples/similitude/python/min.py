def minimum(a):
    m = a[0]
    for i in range(1, len(a)):
        if a[i] < m:
            m = a[i]
    return m


print(minimum([5, 2, 9, 1, 7]))
