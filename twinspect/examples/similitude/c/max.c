#include <stdio.h>

int max(int a[], int n) {
    int m = a[0];
    for (int i = 1; i < n; i++) {
        if (a[i] > m) m = a[i];
    }
    return m;
}

int main(void) {
    int a[] = {5, 2, 9, 1, 7};
    printf("%d\n", max(a, 5));
    return 0;
}
