def gnome_sort(a):
    i = 0
    while i < len(a):
        if i == 0 or a[i - 1] <= a[i]:
            i += 1
        else:
            t = a[i]
            a[i] = a[i - 1]
            a[i - 1] = t
            i -= 1


a = [5, 2, 9, 1, 7]
gnome_sort(a)
print(a)
