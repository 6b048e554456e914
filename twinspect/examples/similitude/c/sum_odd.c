#include <stdio.h>

int sum_odd(int a[], int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] % 2 != 0) s += a[i];
    }
    return s;
}

int main(void) {
    int a[] = {5, 2, 9, 1, 7};
    printf("%d\n", sum_odd(a, 5));
    return 0;
}
