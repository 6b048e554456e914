#include <stdio.h>

int linear_search(int a[], int n, int x) {
    for (int i = 0; i < n; i++) {
        if (a[i] == x) return i;
    }
    return -1;
}

int main(void) {
    int a[] = {5, 2, 9, 1, 7};
    printf("%d\n", linear_search(a, 5, 9));
    return 0;
}
