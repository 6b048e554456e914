#include <stdio.h>

void merge(int a[], int tmp[], int lo, int mid, int hi) {
    int i = lo, j = mid, k = lo;
    while (i < mid && j < hi) {
        if (a[i] <= a[j]) tmp[k++] = a[i++];
        else tmp[k++] = a[j++];
    }
    while (i < mid) tmp[k++] = a[i++];
    while (j < hi) tmp[k++] = a[j++];
    for (k = lo; k < hi; k++) a[k] = tmp[k];
}

void merge_sort(int a[], int tmp[], int lo, int hi) {
    if (hi - lo < 2) return;
    int mid = (lo + hi) / 2;
    merge_sort(a, tmp, lo, mid);
    merge_sort(a, tmp, mid, hi);
    merge(a, tmp, lo, mid, hi);
}

int main(void) {
    int a[] = {5, 2, 9, 1, 7};
    int tmp[5];
    merge_sort(a, tmp, 0, 5);
    for (int i = 0; i < 5; i++) printf("%d\n", a[i]);
    return 0;
}
