#include <stdio.h>

int partition(int a[], int lo, int hi) {
    int pivot = a[hi];
    int i = lo - 1;
    for (int j = lo; j < hi; j++) {
        if (a[j] < pivot) {
            i++;
            int t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    }
    int t = a[i + 1];
    a[i + 1] = a[hi];
    a[hi] = t;
    return i + 1;
}

void quick_sort(int a[], int lo, int hi) {
    if (lo < hi) {
        int p = partition(a, lo, hi);
        quick_sort(a, lo, p - 1);
        quick_sort(a, p + 1, hi);
    }
}

int main(void) {
    int a[] = {5, 2, 9, 1, 7};
    quick_sort(a, 0, 4);
    for (int i = 0; i < 5; i++) printf("%d\n", a[i]);
    return 0;
}
