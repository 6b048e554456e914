def linear_search(a, x):
    for i in range(len(a)):
        if a[i] == x:
            return i
    return -1


print(linear_search([5, 2, 9, 1, 7], 9))
